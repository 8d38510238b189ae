import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

import profiles  # noqa: E402  (needs the tests directory on the path)

settings.load_profile(profiles.profile_name())
