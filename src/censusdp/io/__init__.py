"""Reading, validating and writing the files of the censusdp contract (see DESIGN.md)."""
