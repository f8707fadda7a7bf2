#!/usr/bin/env python3
"""Write a synthetic OpenStreetMap XML file: an N x N grid of nodes (some
tagged as cafes), a street along every row and column, buildings, and one
relation. tests/e2e/data/grid.osm.pbf was made from it with

    python3 tests/e2e/tools/osm_grid.py 120 >grid.osm
    osmium cat -f pbf grid.osm -o tests/e2e/data/grid.osm.pbf

(osmium-tool 1.15.0, Debian 12), for t705, which records and replays
navit's maptool reading it through protobuf-c."""
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 120
random.seed(7)
meta = 'version="1" timestamp="2020-01-01T00:00:00Z" uid="1" user="u" changeset="1"'
out = ['<?xml version="1.0" encoding="UTF-8"?>', '<osm version="0.6" generator="standin-test">']
ids = {}
nid = 1
for i in range(n):
    for j in range(n):
        lat = 52.50 + i * 0.0005 + random.random() * 1e-4
        lon = 13.40 + j * 0.0005 + random.random() * 1e-4
        head = '<node id="%d" %s lat="%.7f" lon="%.7f"' % (nid, meta, lat, lon)
        if random.random() < 0.02:
            out.append(head + '><tag k="amenity" v="cafe"/><tag k="name" v="Cafe %d"/></node>' % nid)
        else:
            out.append(head + "/>")
        ids[(i, j)] = nid
        nid += 1
kinds = ["residential", "primary", "secondary", "footway", "service"]
wid = 1
for along_rows in (True, False):
    for a in range(n):
        out.append('<way id="%d" %s>' % (wid, meta))
        for b in range(n):
            out.append('<nd ref="%d"/>' % ids[(a, b) if along_rows else (b, a)])
        name = ("Street %d" if along_rows else "Avenue %d") % a
        out.append('<tag k="highway" v="%s"/><tag k="name" v="%s"/></way>' % (kinds[a % 5], name))
        wid += 1
for _ in range(n * 5):
    i, j = random.randrange(n - 1), random.randrange(n - 1)
    ring = [ids[(i, j)], ids[(i, j + 1)], ids[(i + 1, j + 1)], ids[(i + 1, j)], ids[(i, j)]]
    out.append('<way id="%d" %s>%s<tag k="building" v="yes"/></way>'
               % (wid, meta, "".join('<nd ref="%d"/>' % r for r in ring)))
    wid += 1
out.append('<relation id="1" %s><member type="way" ref="1" role="outer"/>'
           '<member type="way" ref="2" role="inner"/><tag k="type" v="multipolygon"/>'
           '<tag k="landuse" v="forest"/></relation>' % meta)
out.append("</osm>")
print("\n".join(out))
