"""The live server comes from the environment: the Rust integration test `python_sdk` starts
one, seeds it and runs pytest with these variables set."""

import os

import httpx
import pytest

from harness_registry import Registry


def _env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set: run these tests through the Rust test python_sdk")
    return v


@pytest.fixture(scope="session")
def base_url() -> str:
    return _env("REGISTRY_URL")


@pytest.fixture(scope="session")
def openapi(base_url: str) -> dict:
    r = httpx.get(f"{base_url}/openapi.json", timeout=30)
    r.raise_for_status()
    return r.json()


@pytest.fixture()
def reg(base_url: str):
    with Registry(base_url, _env("REGISTRY_KEY")) as r:
        yield r


@pytest.fixture()
def other(base_url: str):
    with Registry(base_url, _env("REGISTRY_OTHER_KEY")) as r:
        yield r


@pytest.fixture(scope="session")
def skill() -> str:
    return _env("REGISTRY_SKILL")
