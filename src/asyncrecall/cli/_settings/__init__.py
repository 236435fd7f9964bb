"""Settings: flags win over environment variables, which win over settings files.

Files, first found wins per key: ``<project>/.asyncrecall/settings.toml``, then
``$ASYNCRECALL_HOME/settings.toml``. Keys in files are the flag names with ``_`` or
``-`` (``base_url`` or ``base-url``). The project's file applies whole only once the
user trusts it (``_sources``); what each setting is and parses as: ``_values``.
"""

from __future__ import annotations

from asyncrecall.cli._settings._sources import (
    UNTRUSTED_FREE,
    UNTRUSTED_NARROWING,
    SettingsFile,
    home_folder,
    load_settings,
    project_settings_file,
)
from asyncrecall.cli._settings._values import (
    RECALL_MODES,
    OutputFormat,
    SelectorName,
    Settings,
    UntrustedSettings,
    trust_command,
)

__all__ = [
    "RECALL_MODES",
    "UNTRUSTED_FREE",
    "UNTRUSTED_NARROWING",
    "OutputFormat",
    "SelectorName",
    "Settings",
    "SettingsFile",
    "UntrustedSettings",
    "home_folder",
    "load_settings",
    "project_settings_file",
    "trust_command",
]
