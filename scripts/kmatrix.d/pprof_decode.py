"""A gzipped pprof profile (profile.proto) read into plain Python, for the
kmatrix judge (check "python"): the host may have no pprof tool and no
protobuf package, and the judge needs only the samples' stacks of
(function, file, line).  Reads the protobuf wire format directly: varints,
length-delimited fields and packed repeated varints; fixed-width fields are
skipped.

    stacks = samples(gzip_bytes)   # [(count, [(name, file, line), ...]), ...]
                                   # frames innermost first, as pprof stores them
"""
import gzip

# profile.proto field numbers
PROFILE_SAMPLE, PROFILE_LOCATION, PROFILE_FUNCTION, PROFILE_STRINGS = 2, 4, 5, 6
SAMPLE_LOCATION_ID, SAMPLE_VALUE = 1, 2
LOCATION_ID, LOCATION_LINE = 1, 4
LINE_FUNCTION_ID, LINE_LINE = 1, 2
FUNCTION_ID, FUNCTION_NAME, FUNCTION_FILENAME = 1, 2, 4


def varint(buf, i):
    """(value, next index); ValueError past the end or over 10 bytes."""
    v = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong varint at byte %d" % i)
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field number, wire type, value) of one message: an int for varints,
    bytes for length-delimited fields (fixed32/64 are skipped)."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise ValueError("field %d: %d bytes past the end" % (num, n))
            v, i = bytes(buf[i:i + n]), i + n
        elif wt in (1, 5):
            i += 8 if wt == 1 else 4
            continue
        else:
            raise ValueError("field %d: unknown wire type %d" % (num, wt))
        yield num, wt, v


def ints(wt, v):
    """A repeated integer field's values: one varint, or packed."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def samples(data):
    """The samples of a gzipped profile: [(count, frames)], count the first
    value, frames [(function name, file name, line)] innermost first (a
    location's inlined lines in the order the profile lists them)."""
    prof = gzip.decompress(data)
    strings, funcs, locs, raw = [], {}, {}, []
    for num, wt, v in fields(prof):
        if num == PROFILE_STRINGS and wt == 2:
            strings.append(v.decode("utf-8", "replace"))
        elif num == PROFILE_FUNCTION and wt == 2:
            f = {n: x for n, w, x in fields(v) if w == 0}
            funcs[f.get(FUNCTION_ID, 0)] = (f.get(FUNCTION_NAME, 0), f.get(FUNCTION_FILENAME, 0))
        elif num == PROFILE_LOCATION and wt == 2:
            lid, lines = 0, []
            for n, w, x in fields(v):
                if n == LOCATION_ID and w == 0:
                    lid = x
                elif n == LOCATION_LINE and w == 2:
                    ln = {m: y for m, u, y in fields(x) if u == 0}
                    lines.append((ln.get(LINE_FUNCTION_ID, 0), ln.get(LINE_LINE, 0)))
            locs[lid] = lines
        elif num == PROFILE_SAMPLE and wt == 2:
            ids, vals = [], []
            for n, w, x in fields(v):
                if n == SAMPLE_LOCATION_ID:
                    ids += ints(w, x)
                elif n == SAMPLE_VALUE:
                    vals += ints(w, x)
            raw.append((vals[0] if vals else 0, ids))

    def s(k):
        return strings[k] if 0 <= k < len(strings) else ""

    out = []
    for count, ids in raw:
        frames = []
        for lid in ids:
            for fid, line in locs.get(lid, []):
                name, file = funcs.get(fid, (0, 0))
                frames.append((s(name), s(file), line))
        out.append((count, frames))
    return out
