#!/usr/bin/env python3
"""Write a MapServer 8 mapfile whose three layers (lines, points, polygons)
hold N made-up features each, inline, in web-mercator metres over the whole
world, with an MVT output format; and the config file mapserv needs to open
it. mapserv -nh "QUERY_STRING=map=...&mode=tile&tilemode=gmap&tile=X+Y+Z&
layers=all&map.imagetype=mvt" then writes one vector tile: a protobuf-c
pack of a vector_tile.Tile (layers, features, tags, geometry).

usage: mvt_map.py MAPFILE CONFIG [N]"""
import random
import sys

WORLD = 20_000_000.0


def features(kind, n, rnd):
    for i in range(n):
        if kind == "POINT":
            pts = [(rnd.uniform(-WORLD, WORLD), rnd.uniform(-WORLD, WORLD))]
        elif kind == "LINE":
            x, y = rnd.uniform(-WORLD, WORLD), rnd.uniform(-WORLD, WORLD)
            pts = [(x + rnd.uniform(-2e6, 2e6), y + rnd.uniform(-2e6, 2e6)) for _ in range(6)]
        else:
            x, y = rnd.uniform(-WORLD, WORLD - 2e6), rnd.uniform(-WORLD, WORLD - 2e6)
            pts = [(x, y), (x + 1.6e6, y), (x + 1.6e6, y + 1.2e6), (x, y + 1.2e6), (x, y)]
        yield " ".join(f"{a:.1f} {b:.1f}" for a, b in pts), i


def main():
    mapfile, config = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    rnd = random.Random(7)
    out = [f"""MAP
  NAME "tiles"
  EXTENT {-WORLD} {-WORLD} {WORLD} {WORLD}
  SIZE 256 256
  UNITS meters
  PROJECTION
    "init=epsg:3857"
  END
  OUTPUTFORMAT
    NAME "mvt"
    DRIVER MVT
    FORMATOPTION "EXTENT=4096"
  END
"""]
    for name, kind in (("roads", "LINE"), ("pois", "POINT"), ("areas", "POLYGON")):
        out.append(f"""  LAYER
    NAME "{name}"
    TYPE {kind}
    STATUS ON
    PROJECTION
      "init=epsg:3857"
    END
    METADATA
      "gml_include_items" "all"
      "gml_types" "auto"
    END
    PROCESSING "ITEMS=name,kind"
""")
        for pts, i in features(kind, n, rnd):
            out.append(f"""    FEATURE
      POINTS {pts} END
      ITEMS "{name}{i};k{i % 7}"
    END
""")
        out.append("""    CLASS
      STYLE COLOR 0 0 0 END
    END
  END
""")
    out.append("END\n")
    with open(mapfile, "w") as f:
        f.write("".join(out))
    with open(config, "w") as f:
        f.write('CONFIG\n  ENV\n    MS_MAP_PATTERN "."\n  END\nEND\n')


if __name__ == "__main__":
    main()
