/* pb_walk.h — protobuf-c message trees: features, fingerprints, relocatable
 * images and schemas.
 *
 * Everything here works on the in-memory structures declared in
 * <protobuf-c/protobuf-c.h> (descriptors and messages) and never calls a
 * libprotobuf-c function: this code runs inside preloaded shims that
 * intercept those functions. Nothing here allocates on the hot path except
 * where stated, prints, or exits. */
#ifndef STANDIN_PB_WALK_H
#define STANDIN_PB_WALK_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum {
  PBW_OK = 0,
  PBW_E_NOMEM = 1,       /* allocation failed */
  PBW_E_UNSUPPORTED = 2, /* tree holds a pointer that cannot be captured */
  PBW_E_BADIMAGE = 3,    /* image damaged: bad magic, size, offset or fix-up */
  PBW_E_SCHEMA = 4,      /* image does not fit the descriptor it is asked for */
  PBW_E_DEPTH = 5,       /* nesting deeper than PBW_MAX_DEPTH */
  PBW_E_BADSCHEMA = 6,   /* schema bytes damaged */
  PBW_E_BADDATA = 7      /* encoded message does not parse against the schema */
};

#define PBW_MAX_DEPTH 100

const char *pbw_strerror(int err);

/* Statistics of one message tree (st_call feature slots ST_PBF_*). */
typedef struct {
  uint64_t fields;    /* fields present, all levels */
  uint64_t submsgs;   /* sub-messages, all levels, root excluded */
  uint64_t max_depth; /* root alone = 1 */
  uint64_t repeated;  /* elements of repeated fields, all levels */
  uint64_t var_bytes; /* bytes of string and bytes fields, all levels */
  /* sum over the messages of the tree of ceil(fields in its type / 32): the
   * presence-bitmap words a Protoacc-style serializer scans */
  uint64_t field_words;
} pbw_stats;

/* Structural fingerprint of a message tree, as used for pack requests: a
 * 128-bit hash over the type's full name, every present field (number,
 * value; strings and bytes by content), presence, oneof cases, repeated
 * counts and unknown fields, recursively. Two trees that pack to different
 * bytes get different fingerprints; equal trees get equal ones in any
 * process. Fills *st when st is not NULL. Returns PBW_E_DEPTH for trees
 * deeper than PBW_MAX_DEPTH (fp is then unusable). Does not allocate. */
int pbw_fingerprint_tree(const ProtobufCMessage *m, uint8_t fp[16], pbw_stats *st);

/* A tree's hashed stream and fingerprint, kept so that a later call on the
 * same tree (a program sizes a tree, then packs it) gets the fingerprint
 * by comparing the stream instead of hashing it. Trees whose stream fits
 * in one hashing chunk only. */
#define PBW_FP_MEMO 4096
typedef struct {
  const ProtobufCMessage *m; /* NULL: empty */
  size_t n;
  uint8_t fp[16];
  uint8_t stream[PBW_FP_MEMO];
} pbw_fp_memo;

/* pbw_fingerprint_tree (without statistics), except that when m is the
 * memo's tree and walks to the memo's stream the fingerprint is the memo's:
 * the same stream hashes to the same fingerprint. With keep, this walk's
 * stream is kept in memo for the next call. */
int pbw_fingerprint_tree_memo(const ProtobufCMessage *m, uint8_t fp[16], pbw_fp_memo *memo,
                              int keep);

/* The fingerprint's stream written out plain (every string and bytes
 * field's content whole, no digests): *out (malloc'd, the caller frees it)
 * and *len. With ref (ref_len bytes, may be NULL), the content of a string
 * or bytes field of 64 bytes or more that occurs in ref is written as its
 * offset there instead (a pack's response holds every such field of the
 * tree it was packed from). Two trees have the same plain stream exactly
 * when they have the same fingerprint stream, so a replay database can
 * keep it for pbw_tree_matches. PBW_E_NOMEM, or pbw_fingerprint_tree's
 * errors. */
int pbw_tree_stream(const ProtobufCMessage *m, const void *ref, size_t ref_len, uint8_t **out,
                    size_t *len);

/* Whether m's plain stream is stream[0..len), its references read in
 * ref[0..ref_len) (the same bytes pbw_tree_stream was given; NULL if none):
 * then m has the fingerprint of the tree that stream was written from.
 * Costs the walk and a compare, no hashing; reads nothing outside
 * stream[0..len) and ref[0..ref_len). Does not allocate. */
int pbw_tree_matches(const ProtobufCMessage *m, const void *stream, size_t len, const void *ref,
                     size_t ref_len);

/* A copy of every byte of a tree that its fingerprint walk reads: the
 * messages' structs, strings, bytes, arrays and unknown fields, each with
 * the address it was read at, in the order the walk reached them. A tree
 * whose bytes are all still the same (pbw_snap_holds) walks to the same
 * stream, so a thread that packs or sizes one tree again confirms it with
 * a few memcmps instead of a walk. */
#define PBW_SNAP_BYTES 16384
typedef struct {
  const ProtobufCMessage *m; /* NULL: empty */
  size_t n;                  /* bytes of rec used */
  _Alignas(8) unsigned char rec[PBW_SNAP_BYTES];
} pbw_snap;

/* Fills s with m's bytes (s->m = m); on failure s->m is NULL and the
 * result PBW_E_NOMEM (the tree's bytes do not fit in rec), PBW_E_DEPTH or
 * PBW_E_UNSUPPORTED (a type without a walk plan). Does not allocate. */
int pbw_snap_take(const ProtobufCMessage *m, pbw_snap *s);

/* pbw_fingerprint_tree_memo (keeping the stream in memo) and
 * pbw_snap_take in one walk: s holds what pbw_snap_take would give, or
 * s->m is NULL when that would fail (the walk's result is then still the
 * fingerprint's). For a tree a thread fingerprints and then looks up
 * again: the later lookups compare the snapshot instead of walking. Does
 * not allocate. */
int pbw_fingerprint_tree_snap(const ProtobufCMessage *m, uint8_t fp[16], pbw_fp_memo *memo,
                              pbw_snap *s);

/* Whether m is s's tree with every byte its walk reads unchanged: then it
 * has the fingerprint it had when s was taken. Each byte is read through a
 * pointer the bytes before it showed unchanged (a message's type before
 * the rest of its struct, a string's length before its content), so it
 * reads only what a walk of m as it is now would read. */
int pbw_snap_holds(const pbw_snap *s, const ProtobufCMessage *m);

/* The same fingerprint and statistics from the bytes pack wrote for the
 * tree (data, len: an encoded message of the schema's root type; schema:
 * see pbw_schema_build) instead of the tree itself: for any tree that
 * packs to these bytes, fp and *st are what pbw_fingerprint_tree gives,
 * with one exception that needs a hand-built tree (see pb_fpbytes.c): an
 * unknown field that pack wrote where a known field with the same number
 * and wire type could have been. PBW_E_DEPTH as pbw_fingerprint_tree (the
 * statistics then stop where the tree's do); PBW_E_BADSCHEMA,
 * PBW_E_BADDATA for damaged input, which is never read out of bounds;
 * PBW_E_NOMEM. Fills *st (when not NULL) in every case. */
int pbw_fingerprint_packed(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                           uint8_t fp[16], pbw_stats *st);

/* The same for many messages of one schema: the schema checked and decoded
 * once into a plan (one allocation; the schema bytes may go), then each
 * message costs a pass over its bytes and no allocation. */
typedef struct pbw_packed_plan pbw_packed_plan; /* incomplete type */
int pbw_packed_plan_build(const void *schema, size_t schema_len, pbw_packed_plan **out);
int pbw_fingerprint_packed_plan(const pbw_packed_plan *plan, const uint8_t *data, size_t len,
                                uint8_t fp[16], pbw_stats *st);
void pbw_packed_plan_free(pbw_packed_plan *p); /* accepts NULL */

/* Fingerprint of an unpack request: hash of the type's full name and the
 * encoded bytes. */
void pbw_fingerprint_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                           uint8_t fp[16]);

/* XXH3-128 of the bytes (h[0] low, h[1] high; AVX2 where the CPU has it,
 * same result), and the unpack fingerprint from it: together, exactly
 * pbw_fingerprint_bytes, for a caller that hashes the bytes anyway. */
void pbw_hash_bytes(const void *data, size_t len, uint64_t h[2]);
void pbw_fingerprint_hashed(const ProtobufCMessageDescriptor *d, const uint64_t h[2], size_t len,
                            uint8_t fp[16]);
/* The same from the type's name hash (pbw_name_hash of its full name,
 * NULL for none), for a caller that no longer holds the descriptor. */
uint64_t pbw_name_hash(const char *name);
void pbw_fingerprint_named(uint64_t name_hash, const uint64_t h[2], size_t len, uint8_t fp[16]);

/* Statistics of a tree without hashing. */
int pbw_tree_stats(const ProtobufCMessage *m, pbw_stats *st);

/* ---- Relocatable images -------------------------------------------------
 *
 * An image is everything protobuf_c_message_unpack allocated for one tree,
 * laid out in one block, plus a fix-up list, so that replay can rebuild the
 * tree with one allocation, one copy and pointer fix-ups instead of parsing.
 * Pointers that do not point into the tree (descriptors, string and bytes
 * default values, protobuf_c_empty_string) are stored symbolically and
 * re-bound to the addresses of the replaying process. */

/* Capture the tree rooted at m (as returned by protobuf_c_message_unpack).
 * On success *img is a malloc'd image of *len bytes. PBW_E_UNSUPPORTED when
 * some pointer in the tree is none of the kinds above. */
int pbw_image_build(const ProtobufCMessage *m, void **img, size_t *len);

/* Bytes the rebuilt tree will occupy (the single allocation), or 0 if the
 * image header is invalid. */
size_t pbw_image_alloc_size(const void *img, size_t len);

/* Rebuild a tree from an image for descriptor d. Allocates exactly one
 * block of pbw_image_alloc_size() bytes with alloc (NULL = malloc); the
 * root message is at the start of the block, so freeing the root pointer
 * with the same allocator frees the whole tree. Every offset and size in
 * the image is checked against len; descriptors are re-bound by walking
 * from d and their names and sizes must match the image (PBW_E_SCHEMA
 * otherwise). On failure nothing is allocated and *out is NULL. */
int pbw_image_materialise(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                          ProtobufCAllocator *alloc, ProtobufCMessage **out);

/* pbw_image_materialise for a caller that materialises the same image
 * many times: the first call checks everything and records in *memo what
 * it established (image, descriptor, bound types); later calls with the
 * same image, length and descriptor skip the checks and only copy and fix
 * up. The caller promises that the image bytes were built by
 * pbw_image_build and cannot change (the replay shim maps them read-only),
 * so the checksum is not verified even on the first call; the structural
 * checks are. A zeroed memo is empty; memo = NULL is
 * pbw_image_materialise. Threads may share a memo; it is filled once, for
 * the first image and descriptor checked with it. */
typedef struct {
  _Atomic(const ProtobufCMessageDescriptor *) root;
  const void *img;
  size_t len;
  const ProtobufCMessageDescriptor *const *tab;
  _Atomic(const void *) pieces; /* how the image splits (pb_image.c), once known */
  _Atomic unsigned built;       /* trees built piece by piece before the memo was filled */
} pbw_image_memo;

/* The process's images were built by pbw_image_build and cannot change
 * (the replay shim maps them read-only): skip their checksums even without
 * a memo. The structural checks still run on every image. Off by default. */
void pbw_image_trust(int on);

/* A library was unloaded: descriptors, defaults and the empty string may
 * have gone with it. Images first seen after this are not built from
 * plans made before (the shapes of pb_image.c); memos are the caller's. */
void pbw_image_types_changed(void);

int pbw_image_materialise_memo(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                               ProtobufCAllocator *alloc, ProtobufCMessage **out,
                               pbw_image_memo *memo);

/* pbw_image_materialise_memo, but allocated as libprotobuf-c's unpack
 * allocates: one allocation per message, string, bytes datum, repeated
 * array and unknown field, so that protobuf_c_message_free_unpacked (the
 * real one) frees the tree, at the cost it has natively, and a program may
 * free or replace parts itself. PBW_E_UNSUPPORTED for an image that does not
 * split (it then allocates nothing; pbw_image_materialise_memo still
 * works). */
int pbw_image_materialise_pieces(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                                 ProtobufCAllocator *alloc, ProtobufCMessage **out,
                                 pbw_image_memo *memo);

/* The materialisers above, for an image that may refer to the request it
 * was unpacked from (pbw_image_refer): req, req_len are those bytes (the
 * caller has checked that they are the recorded ones). pieces: allocate as
 * pbw_image_materialise_pieces, else one block (memo as
 * pbw_image_materialise_memo). With a memo, the plan it keeps holds a
 * block of up to 4 KiB with the request's bytes filled in, and later calls
 * copy from it without reading req: every request given with one memo
 * must be the recorded one. An image that refers to a request is refused
 * (PBW_E_BADIMAGE) by the materialisers without one. */
int pbw_image_materialise_req(const void *img, size_t len, const void *req, size_t req_len,
                              const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                              ProtobufCMessage **out, pbw_image_memo *memo, int pieces);

/* Make the image *img (*len bytes, malloc'd, from pbw_image_build) refer
 * to req, the req_len bytes its tree was unpacked from, for its pieces of
 * 64 bytes or more that are those bytes (long strings and bytes fields),
 * instead of holding a copy: *img is then replaced by a smaller image.
 * Images that do not split, and trees with no such piece, are left as they
 * are. PBW_OK, or PBW_E_NOMEM (the image is then unchanged). */
int pbw_image_refer(void **img, size_t *len, const void *req, size_t req_len);

/* Full name of the root type recorded in an image, or NULL if invalid.
 * Points into img. */
const char *pbw_image_type_name(const void *img, size_t len);

/* ---- Schemas -------------------------------------------------------------
 *
 * A schema is a self-contained serialisation of a message descriptor and
 * every message and enum descriptor reachable from it: names (full, short,
 * C and package), field names, numbers, labels, types, all flags, the C
 * layout (sizeof_message, each field's offset and quantifier_offset) and
 * defaults (string text, bytes content, the exact bits of numbers), plus
 * enum values and their by-name index. Offline tools decode saved payloads
 * with it without the program's generated code (pbw_decode_json,
 * pbw_stats_from_bytes), and replay rebuilds the program's descriptors
 * from it (pbw_descset_from_schema). The layout is only meaningful on the
 * kind of machine (pointer width, byte order) that built the schema. */

/* Serialise the schema rooted at d into *buf (from pbw_schema_allocator's
 * allocator, libc's by default). Reads only the
 * descriptors, and runs each type's message_init (the program's generated
 * init, not libprotobuf-c) on scratch memory to learn initial values that
 * no descriptor records; so it may run on any thread. PBW_E_UNSUPPORTED
 * for descriptors protoc-c would not generate (NULL names, unsorted field
 * numbers, sizes beyond 32 bits). */
int pbw_schema_build(const ProtobufCMessageDescriptor *d, void **buf, size_t *len);

/* Where pbw_schema_build gets its memory (and *buf, to be freed with
 * free_fn); NULL: libc's. Process-wide; set before any build. */
void pbw_schema_allocator(void *(*realloc_fn)(void *, size_t), void (*free_fn)(void *));

/* A schema's identity: equal for the schemas of one type built by this
 * version of the builder from the same program, different (but for a
 * 64-bit hash's chance) when the type or any type it reaches differs in a
 * field, a default or its C layout. 0: not a schema of this version. */
uint64_t pbw_schema_id(const void *schema, size_t len);

/* The allocator of the split plans a memo keeps for the life of the
 * process (default malloc and free): the replay shim's own heap, off the
 * program's. Set once, before any image is built. */
void pbw_image_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *));

/* A function the one-block builds call with each block as soon as it is
 * allocated, before anything is written to it; nonzero refuses the block
 * (the build frees it and fails with PBW_E_NOMEM). The replay shim
 * registers its blocks so (rp_own_add), before the copy: a registration's
 * atomics would otherwise wait for every store of the copy. NULL (the
 * default): none. Set once, before any image is built. */
void pbw_image_block_hook(int (*fn)(void *blk));

/* libprotobuf-c 1.x's unpack lists the fields it scans before it parses
 * them: 16 on its stack, then slabs from the caller's allocator of 32, 64,
 * 128 ... entries of 32 bytes (ScannedMember on LP64), freed as it
 * returns; each nested message's unpack lists its own. A tree built from
 * an image needs none of them, but an allocator with a limit (an arena)
 * must see them, or a rebuilt tree exists where the library runs out (a
 * message of 20 unpacked integers: 1 KB of slab against ~170 bytes of
 * tree, t134). pbw_parse_slabs_take takes from a the slabs the library
 * would for the message (data, len) of type d: the top level's left in
 * *top, for pbw_parse_slabs_free once the tree is built, each nested
 * message's taken and given back in turn. -1 when a refuses one, as it
 * would have refused the library (nothing is then left taken). Bytes that
 * do not scan, or nesting past 64, end the mimicry there (0). */
#define PBW_PARSE_SLABS 23 /* the library gives up past 22 slabs */
typedef struct {
  void *p[PBW_PARSE_SLABS];
  int n;
} pbw_parse_slabs;
int pbw_parse_slabs_take(const ProtobufCMessageDescriptor *d, ProtobufCAllocator *a,
                         const uint8_t *data, size_t len, pbw_parse_slabs *top);
void pbw_parse_slabs_free(ProtobufCAllocator *a, pbw_parse_slabs *s);

/* Decode `data` (an encoded message of the schema's root type) to a JSON
 * object in a malloc'd NUL-terminated string (*json). Unknown fields are
 * shown by number. PBW_E_BADSCHEMA / PBW_E_BADDATA on damaged input; never
 * reads out of bounds. */
int pbw_decode_json(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                    char **json);

/* Re-derive statistics (pbw_stats) from encoded bytes and a schema, for
 * offline tools. */
int pbw_stats_from_bytes(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                         pbw_stats *st);

/* The same for many messages of one schema: the schema is checked (and its
 * checksum computed) once, by pbw_stats_plan_build; the plan points into
 * the schema bytes, which must outlive it. */
typedef struct pbw_stats_plan pbw_stats_plan; /* incomplete type */
int pbw_stats_plan_build(const void *schema, size_t schema_len, pbw_stats_plan **out);
int pbw_stats_from_bytes_plan(const pbw_stats_plan *p, const uint8_t *data, size_t len,
                              pbw_stats *st);
void pbw_stats_plan_free(pbw_stats_plan *p); /* accepts NULL */

/* ---- Descriptors rebuilt from a schema -------------------------------------
 *
 * Real protobuf-c descriptors rebuilt from a schema (with the recorded
 * program's C layout), so that libprotobuf-c can unpack recorded bytes
 * offline and pbw_image_build can capture the result for replay: the image
 * then materialises against the program's generated descriptors.
 *
 * The rebuilt graph holds what libprotobuf-c 1.4.1's unpack, free_unpacked,
 * pack and get_packed_size read, laid out as protoc-c emits it: fields by
 * number, fields_sorted_by_name, field_ranges with protoc-c's sentinel,
 * sub-message and enum descriptor pointers (cycles included), defaults in
 * storage of each field's own (string defaults compare by pointer), and a
 * NULL message_init, for which unpack uses its generic initialiser. Enum
 * descriptors carry their values, value ranges and by-name index.
 *
 * pbw_descset_from_schema validates the whole schema first: PBW_E_BADSCHEMA
 * for damaged bytes and for layouts libprotobuf-c could not use safely
 * (a member or has_/n_/case member outside sizeof_message, misaligned or
 * overlapping another, inconsistent oneofs or flags); PBW_E_UNSUPPORTED for
 * a schema built on another kind of machine; PBW_E_NOMEM. On success *out
 * owns everything in one allocation, and the descriptors stay valid until
 * pbw_descset_free. This code calls no libprotobuf-c function itself. */
typedef struct pbw_descset pbw_descset; /* incomplete type */
int pbw_descset_from_schema(const void *schema, size_t len, pbw_descset **out);
const ProtobufCMessageDescriptor *pbw_descset_root(const pbw_descset *s);
void pbw_descset_free(pbw_descset *s); /* accepts NULL */

#endif
