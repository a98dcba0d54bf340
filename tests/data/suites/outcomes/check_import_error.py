"""A test module that cannot be imported: pytest reports it as a collection error."""

import a_module_that_does_not_exist  # noqa: F401


def test_unreachable() -> None:
    assert True
