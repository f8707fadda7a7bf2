#!/usr/bin/env python3
"""Write a PDF with one page per JPEG file, each image embedded as it is
(a DCTDecode stream), so that a PDF renderer decodes it with libjpeg.

usage: jpeg_pdf.py OUT.pdf IMAGE.jpg...
"""
import struct
import sys

SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def jpeg_geometry(data, name):
    """(width, height, components) from the image's frame header."""
    if data[:2] != b"\xff\xd8":
        sys.exit(f"jpeg_pdf.py: {name}: not a JPEG file (no SOI marker)")
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            sys.exit(f"jpeg_pdf.py: {name}: no marker at byte {i}")
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        if marker in SOF:
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height, data[i + 9]
        i += 2 + length
    sys.exit(f"jpeg_pdf.py: {name}: no frame header (SOFn) found")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    images = []
    for name in sys.argv[2:]:
        with open(name, "rb") as f:
            data = f.read()
        images.append((data, *jpeg_geometry(data, name)))

    objs = []  # bodies; object n is objs[n - 1]
    n = len(images)
    # 1: catalog, 2: pages, then per image: page, content, image
    kids = " ".join(f"{3 + 3 * k} 0 R" for k in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for k, (data, w, h, comps) in enumerate(images):
        page, content, image = 3 + 3 * k, 4 + 3 * k, 5 + 3 * k
        space = {1: "/DeviceGray", 3: "/DeviceRGB", 4: "/DeviceCMYK"}.get(comps)
        if space is None:
            sys.exit(f"jpeg_pdf.py: {sys.argv[2 + k]}: {comps} components")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {w} {h}] /Contents {content} 0 R "
            f"/Resources << /XObject << /Im0 {image} 0 R >> >> >>".encode())
        draw = f"q {w} 0 0 {h} 0 0 cm /Im0 Do Q".encode()
        objs.append(b"<< /Length %d >>\nstream\n" % len(draw) + draw + b"\nendstream")
        objs.append(
            f"<< /Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace {space} "
            f"/BitsPerComponent 8 /Filter /DCTDecode /Length {len(data)} >>\nstream\n".encode() +
            data + b"\nendstream")

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    with open(sys.argv[1], "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
