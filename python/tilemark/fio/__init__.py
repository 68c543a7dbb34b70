"""fio job files in and out: `tilemark run job.fio`, `tilemark import-fio`, `export --fio`."""

from tilemark.fio.export import job_text
from tilemark.fio.translate import Translation, toml_text, translate

__all__ = ["Translation", "job_text", "toml_text", "translate"]
