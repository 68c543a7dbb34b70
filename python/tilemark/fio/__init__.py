"""fio job files in and out: `tilemark run job.fio`, `tilemark import-fio`, `export --fio`."""

from tilemark.fio.export import FIO_EXPORT_MARK, job_text
from tilemark.fio.translate import Translation, toml_text, translate

__all__ = ["FIO_EXPORT_MARK", "Translation", "job_text", "toml_text", "translate"]
