"""The outcome of a validation: each check's verdict and detail, by name."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ValidationReport:
    """Outcome of every check; ``ok`` only if all passed."""

    checks: dict[str, dict] = field(default_factory=dict)
    task_cpu_seconds: float = 0.0
    """CPU seconds of the tasks that read part files (not part of the verdict)."""
    nmf_proofs: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per run whose NMF check passed, ``(proof, detail)``: a digest of what the check
    depends on (the NMF files' recorded SHA-256, the run's budget record and measured
    geounits, :func:`~censusdp.release.validate.run.nmf_proof`) and its verdict's detail (not part of the
    verdict: what lets a re-estimate that copied the NMF byte for byte not count it
    again)."""
    part_digests: dict[str, str] = field(default_factory=dict)
    """The SHA-256 of the part files the check's tasks read, by path in the release (not
    part of the verdict: what lets a re-estimate whose NMF parts are hard links to these
    not read them again for its checksums)."""

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        """Record one check."""
        self.checks[name] = {"ok": bool(ok), "detail": detail}

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c["ok"] for c in self.checks.values())

    def failures(self) -> list[str]:
        """Names and details of failed checks."""
        return [f"{k}: {v['detail']}" for k, v in self.checks.items() if not v["ok"]]

    def to_dict(self) -> dict:
        """For the manifest."""
        return {"ok": self.ok, "checks": self.checks}
