"""Reading, validating and writing the files of the censusdp contract (docs/file-formats.md)."""
