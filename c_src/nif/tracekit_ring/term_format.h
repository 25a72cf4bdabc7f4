/* term_format.h: how encode.c writes terms and decode.c reads them back.
 *
 * One tag byte, then:
 *   T_NIL                      []
 *   T_ATOM   word              the atom's term (atoms live forever)
 *   T_PID    word              a local pid's term (an immediate)
 *   T_PORT   word              a local port's term (an immediate)
 *   T_INT    int64
 *   T_FLOAT  double
 *   T_BIN    u32 len, bytes
 *   T_BINCUT u32 len, u64 total, bytes   a binary cut to its first bytes:
 *                              decodes to {'...', Prefix, TotalBytes}
 *   T_LIST   u32 n, n terms, tail term
 *   T_TUPLE  u32 n, n terms
 *   T_MAP    u32 n, n key and value terms
 *   T_EXT    u32 len, external term format (refs, funs, bignums, remote
 *            pids and ports: what the NIF API cannot take apart)
 *   T_CUT                      the marker '...' for what did not fit
 *   T_IMM    word              any immediate (atom, small integer, [],
 *                              local pid or port), stored as its word:
 *                              immediates are valid in every environment
 * Multi-byte values are in native byte order and unaligned.
 */
#ifndef TK_TERM_FORMAT_H
#define TK_TERM_FORMAT_H

enum {
    T_NIL = 0,
    T_ATOM,
    T_PID,
    T_PORT,
    T_INT,
    T_FLOAT,
    T_BIN,
    T_BINCUT,
    T_LIST,
    T_TUPLE,
    T_MAP,
    T_EXT,
    T_CUT,
    T_IMM
};

/* Deeper nesting than this is cut (and bounds the decoder's recursion). */
#define TERM_MAX_DEPTH 200

#endif
