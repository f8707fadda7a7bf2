/* jpeg_regen.h — rebuild a libjpeg decode's response from its request.
 *
 * Record keeps most decodes' rows as a digest (jpeg_req.h): the request
 * holds the image datastream and every parameter that changes the pixels,
 * so decoding it again gives the rows, and the digest says whether it did.
 * The replay database is built with this before the program runs, as it
 * rebuilds protobuf unpack responses from their bytes.
 *
 * TurboJPEG calls are made again the same way (jpeg_tj.h).
 *
 * For offline tools only: it calls libjpeg and TurboJPEG, whose functions
 * the shims define, so nothing a shim links may reference it. */
#ifndef STANDIN_JPEG_REGEN_H
#define STANDIN_JPEG_REGEN_H

#include <stddef.h>
#include <stdint.h>

/* Decode the request blob `req` again and check the rows against the digest
 * blob `dig` (JPG_DIG_MAGIC, then the extension, if any). On success,
 * *out is a malloc'ed response of resp_len bytes, the rows then the
 * extension, as the recording would have saved it; returns 0. Otherwise
 * returns -1 and writes why (a phrase: "the rows decoded here differ from
 * the recorded ones") into why[whylen]. */
int jpg_regenerate(const uint8_t *req, size_t req_len, const uint8_t *dig, size_t dig_len,
                   uint64_t resp_len, uint8_t **out, char *why, size_t whylen);

#endif
