"""Human sizes and durations: every accepted spelling, and refusals that name the field."""
import pytest

from snakemake_executor_plugin_htcannex.units import (
    UnitError,
    format_duration_s,
    format_size_mib,
    parse_duration_s,
    parse_size_mib,
)


@pytest.mark.parametrize(
    "text, mib",
    [
        ("128GB", 128 * 1024),
        ("80G", 80 * 1024),
        (131072, 131072),  # bare number: MiB, as request_memory
        ("131072", 131072),
        ("512MB", 512),
        ("512M", 512),
        ("512 MiB", 512),
        ("1.5TB", 1536 * 1024),
        ("4 GiB", 4096),  # binary spelling: the same size as 4GB here
        ("4gb", 4096),
        ("2048KB", 2),
        ("1K", 1),  # rounded up to a whole MiB, as HTCondor rounds requests
        ("1T", 1024 * 1024),
        (0, 0),
        (2.5, 3),
    ],
)
def test_sizes_follow_htcondor_units(text, mib):
    assert parse_size_mib(text, field="f") == mib


@pytest.mark.parametrize("bad", ["12XB", "512B", "1.2.3G", "GB", "", "-5GB", "four GB", "4 Gi", True, None, [4]])
def test_bad_sizes_are_refused_naming_the_field(bad):
    with pytest.raises(UnitError) as error:
        parse_size_mib(bad, field="sites.expanse.memory")
    message = str(error.value)
    assert message.startswith("sites.expanse.memory: ")
    assert "128GB" in message  # the examples show how to write it


def test_negative_number_is_refused():
    with pytest.raises(UnitError, match="cannot be negative"):
        parse_size_mib(-1, field="x")


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("4h", 4 * 3600),
        ("30m", 1800),
        ("90s", 90),
        ("2d", 2 * 86400),
        ("1h30m", 5400),
        ("19h59m", 19 * 3600 + 59 * 60),
        ("1.5h", 5400),
        ("4 H", 4 * 3600),
        (240, 240 * 60),  # bare number: minutes, as Snakemake's runtime
        ("240", 240 * 60),
        (0, 0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration_s(text, field="f") == seconds


@pytest.mark.parametrize("bad", ["4 hours", "h", "", "4w", "1h-30m", "-1h", False, None])
def test_bad_durations_are_refused_naming_the_field(bad):
    with pytest.raises(UnitError) as error:
        parse_duration_s(bad, field="sites.aws.lifetime")
    assert str(error.value).startswith("sites.aws.lifetime: ")
    assert "4h" in str(error.value)


@pytest.mark.parametrize("mib, text", [(94208, "92GB"), (1536, "1536MB"), (1024 * 1024, "1TB"), (0, "0MB")])
def test_size_formatting_is_exact_and_parses_back(mib, text):
    assert format_size_mib(mib) == text
    assert parse_size_mib(text, field="f") == mib


@pytest.mark.parametrize("seconds, text", [(71940, "19h59m"), (40 * 3600, "1d16h"), (90, "1m30s"), (0, "0s")])
def test_duration_formatting_parses_back(seconds, text):
    assert format_duration_s(seconds) == text
    assert parse_duration_s(text, field="f") == seconds
