"""A model a worker's config does not know: the error says which worker host and which file."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.providers.resolve import ModelUnavailable, ProviderResolver
from agentlane.run import ModelRef
from agentlane.settings import Settings


def test_an_unknown_model_names_the_worker_host_and_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_model = "offline/planner"\n')
    resolver = ProviderResolver(Settings(data_dir=tmp_path, host_id="web-2"), env={})
    with pytest.raises(ModelUnavailable) as err:
        resolver.resolve(ModelRef(provider="dead", model="m1"))
    said = str(err.value)
    assert "unknown model 'dead/m1'" in said
    assert f"worker host web-2 reads {config}" in said
    assert "every host needs the model in its own config file" in said


def test_with_no_config_file_it_says_there_is_none(tmp_path: Path) -> None:
    resolver = ProviderResolver(Settings(data_dir=tmp_path, host_id="web-2"), env={})
    with pytest.raises(ModelUnavailable, match=f"reads no config file \\(none in {tmp_path}\\)"):
        resolver.resolve(ModelRef(provider="dead", model="m1"))
