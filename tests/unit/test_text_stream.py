from engine.decoding.text_stream import StopStringFilter, Utf8Stream


def test_multibyte_character_split_across_pieces_is_never_emitted_half():
    data = "añ😀b".encode()
    stream = Utf8Stream()
    outputs = [stream.feed(data[i : i + 1]) for i in range(len(data))]
    assert "\ufffd" not in "".join(outputs)
    assert "".join(outputs) + stream.flush() == "añ😀b"
    assert all(len(o) <= 1 for o in outputs)


def test_incomplete_tail_becomes_replacement_at_flush():
    stream = Utf8Stream()
    assert stream.feed("😀".encode()[:2]) == ""
    assert stream.flush() == "\ufffd"


def test_stop_string_across_deltas_is_cut_and_never_shown():
    f = StopStringFilter(["</end>"])
    shown = f.feed("hello </") + f.feed("en") + f.feed("d> world")
    assert shown == "hello "
    assert f.stopped


def test_partial_stop_prefix_is_released_when_it_diverges():
    f = StopStringFilter(["STOP"])
    assert f.feed("go ST") == "go "
    assert f.feed("ART") == "START"
    assert f.flush() == ""
    assert not f.stopped


def test_without_stop_strings_everything_passes():
    f = StopStringFilter()
    assert f.feed("abc") == "abc"
