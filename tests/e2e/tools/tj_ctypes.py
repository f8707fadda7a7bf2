"""Decode JPEG files with libturbojpeg through ctypes, as PyTurboJPEG does:
the library is dlopen'ed and every function looked up on its handle.
Prints, per file, the header's size, the decode's status and a digest of
the pixels (t713)."""
import ctypes
import hashlib
import sys

tj = ctypes.CDLL("libturbojpeg.so.0")
tj.tjInitDecompress.restype = ctypes.c_void_p
tj.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong] + [
    ctypes.POINTER(ctypes.c_int)
] * 4
tj.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p] + [
    ctypes.c_int
] * 5
tj.tjDestroy.argtypes = [ctypes.c_void_p]
TJPF_RGB = 0

handle = tj.tjInitDecompress()
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    name = path.rsplit("/", 1)[-1]
    w, h, sub, cs = (ctypes.c_int() for _ in range(4))
    if tj.tjDecompressHeader3(handle, data, len(data), *(ctypes.byref(v) for v in (w, h, sub, cs))):
        print(name, "no header")
        continue
    pixels = ctypes.create_string_buffer(w.value * h.value * 3)
    rc = tj.tjDecompress2(handle, data, len(data), pixels, w.value, 0, h.value, TJPF_RGB, 0)
    print(name, w.value, h.value, rc, hashlib.sha1(pixels.raw).hexdigest()[:16])
tj.tjDestroy(handle)
