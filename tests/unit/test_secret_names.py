from harness.process.secret_names import is_secret, masked


def test_secret_words_are_whole_words() -> None:
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "API_KEY"):
        assert is_secret(name), name
    for name in ("TIKTOKEN_CACHE_DIR", "TIKTOKEN_RS_CACHE_DIR", "KEYBOARD", "HOME", "MONKEY"):
        assert not is_secret(name), name


def test_masked_keeps_names_hides_values() -> None:
    assert masked({"HF_TOKEN": "abc", "HOME": "/h"}) == {"HF_TOKEN": "***", "HOME": "/h"}
