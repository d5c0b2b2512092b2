"""Tests for nutchy.core.signature (reference §11)."""

from __future__ import annotations

import hashlib

import pytest

from nutchy.core.signature import MD5Signature, TextProfileSignature, java_hash_map_order


def test_md5_of_content_else_base_url() -> None:
    sig = MD5Signature()
    assert sig.calculate(b"hello", None, None).hex() == "5d41402abc4b2a76b9719d911017c592"
    assert sig.calculate(b"", None, "http://a/") == hashlib.md5(b"http://a/").digest()
    assert sig.calculate(None, "text", "http://a/") == hashlib.md5(b"http://a/").digest()
    with pytest.raises(ValueError, match="content or a base URL"):
        sig.calculate(None, None, None)


def test_text_profile_quantizes_and_drops_rare_tokens() -> None:
    sig = TextProfileSignature()
    # "ab" is too short, "once" appears once while the top count is 3: dropped. Counts round
    # down to multiples of QUANT = 2.
    profile = sig.profile("ab ab ab word word word once other other")
    assert sorted(profile.split("\n")) == ["other 2", "word 2"]
    assert sig.profile("Café CAFÉ café") == "café 2"


def test_text_profile_single_occurrences_kept_when_max_is_one() -> None:
    assert sorted(TextProfileSignature().profile("alpha beta").split("\n")) == ["alpha 1", "beta 1"]


def test_text_profile_separators_follow_java() -> None:
    sig = TextProfileSignature()
    # A character outside the BMP splits tokens (surrogate halves are not letters), and "½"
    # (category No) is not a letter or digit for Java.
    assert sig.profile("abc\U0001d400abc abc½abc") == "abc 4"
    assert sig.profile("İİİ") == "iii 1"


def test_text_profile_is_md5_of_profile_and_falls_back() -> None:
    sig = TextProfileSignature()
    text = "the cat the cat"
    assert sig.calculate(b"x", text, None) == hashlib.md5(sig.profile(text).encode()).digest()
    assert sig.calculate(b"raw", "", "http://a/") == hashlib.md5(b"raw").digest()


def test_profile_ties_in_hash_map_order() -> None:
    words = [f"w{i:03d}" for i in range(30)]
    text = " ".join(words * 2)
    lines = TextProfileSignature().profile(text).split("\n")
    assert [line.split()[0] for line in lines] == java_hash_map_order(words)


def test_java_hash_map_order_resizes() -> None:
    # "Aa" and "BB" share a Java hash: same bucket, insertion order.
    assert java_hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hash_map_order(["Aa", "BB"]) == ["Aa", "BB"]
    # "0".."9" hash to 48..57 and "10".."12" to 1567..1569. 13 keys > 12 resize the map to 32
    # buckets: "0".."9" land in buckets 16..25, "10" in 31, "11" in 0 and "12" in 1.
    keys = [str(i) for i in range(13)]
    assert java_hash_map_order(keys) == ["11", "12", *[str(i) for i in range(10)], "10"]


# Keys put in this order into a java.util.HashMap, and the order OpenJDK 17 iterates them.
# Each differs from the order the table size alone gives (buckets in insertion order).
JAVA_HASH_MAP_VECTORS = {
    # Nine keys in bucket 5 of the 16-bucket table: Java doubles it to 32 at the ninth, so the
    # keys sit in a 32-bucket table though ten keys would fit in 16.
    "early resize": (
        "fvrgoq beg pcw auwbg dtd rtv mfm hpdq uiyh zzz",
        "fvrgoq beg pcw auwbg hpdq dtd rtv mfm uiyh zzz",
    ),
    # Twelve keys sharing their low 7 hash bits among 40: the bucket of the 64-bucket table
    # becomes a red-black tree at its tenth key; the tree's root iterates first and a key added
    # to the tree follows its parent.
    "tree bucket": (
        (
            "ldkwo bpmkjp ypb dhzeg mhnl pvq opl ktt isbhuj guj wjxlr lebq hshaib mvar kekiyf"
            " faeb qen byj bzjs keaz wgge adzk fmgrt ybeg jeblu yqi qyvod ivwggm kiwx pbfzx zuyio"
            " iciftx yfkgk opts ylemg gqkg scxhw ljy kjfp ojfdk"
        ),
        (
            "ivwggm kiwx bzjs yqi fmgrt qyvod ybeg opts jeblu ylemg wgge qen kjfp kekiyf hshaib"
            " keaz mvar ypb ldkwo bpmkjp iciftx dhzeg mhnl pvq opl ktt isbhuj pbfzx zuyio byj"
            " scxhw wjxlr gqkg faeb adzk lebq ljy yfkgk guj ojfdk"
        ),
    ),
    # Sixteen keys with one hash code: two early resizes (16 to 32 to 64), then a tree ordered
    # by String.compareTo.
    "equal hash codes": (
        (
            "AaAaBBAa AaAaBBBB AaBBAaAa BBBBAaBB BBAaAaBB AaAaAaBB AaBBBBAa AaBBBBBB AaAaAaAa"
            " BBBBBBBB BBAaBBAa BBBBBBAa BBBBAaAa AaBBAaBB BBAaBBBB BBAaAaAa"
        ),
        (
            "BBAaAaBB AaAaBBBB AaAaBBAa AaBBAaAa AaBBAaBB BBBBAaBB AaAaAaBB AaBBBBAa AaBBBBBB"
            " BBAaAaAa AaAaAaAa BBBBBBBB BBBBBBAa BBAaBBAa BBBBAaAa BBAaBBBB"
        ),
    ),
}


@pytest.mark.parametrize("case", JAVA_HASH_MAP_VECTORS)
def test_java_hash_map_order_early_resizes_and_tree_buckets(case: str) -> None:
    keys, java = JAVA_HASH_MAP_VECTORS[case]
    assert java_hash_map_order(keys.split()) == java.split()


def test_text_profile_ties_follow_a_tree_bucket() -> None:
    # The profile of a text whose 40 tokens all appear twice lists them in the HashMap's order,
    # the tree bucket's included.
    keys, java = JAVA_HASH_MAP_VECTORS["tree bucket"]
    profile = TextProfileSignature().profile(" ".join(keys.split() * 2))
    assert profile == "\n".join(f"{word} 2" for word in java.split())


def test_text_profile_quant_from_highest_count() -> None:
    # maxFreq 250 * 0.01 = 2.5, which Java's Math.round takes up to QUANT = 3.
    profile = TextProfileSignature().profile("aaa " * 250 + "bbb " * 5 + "ccc " * 2)
    assert profile == "aaa 249\nbbb 3"
