/* tk_ext.h: the external term format as trace files hold it (FORMAT.md):
 * dictionary entries, and the EXT terms of records. One check that the
 * writer and every reader apply (the VM's reader before binary_to_term,
 * tracekit-cat before its own parser), so that what one reader takes
 * every reader takes, and the writer writes nothing a reader refuses.
 *
 * A term passes when it is well formed (every tag known, every length
 * within the bytes, exactly `len` bytes in all), when each atom has at
 * most 255 characters (a UTF-8 one valid UTF-8, without overlong forms or
 * surrogates), a big integer's sign is 0 or 1 and a bitstring's last
 * byte holds 1 to 8 bits, and when it nests at most TK_EXT_MAX_DEPTH
 * deep: a tuple, list, map, fun or export opened at depth d holds terms
 * at depth d + 1, the root is at depth 0, and nothing is opened at depth
 * TK_EXT_MAX_DEPTH or more (the rule of the records' own terms,
 * tk_term.h). Compressed terms, atom cache references and the old fun
 * format are refused (term_to_binary/1 without options never makes
 * them). The check needs no recursion and no memory.
 */
#ifndef TK_EXT_H
#define TK_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk_term.h"

#define TK_EXT_MAX_DEPTH TK_TERM_MAX_DEPTH
#define TK_EXT_MAX_ATOM_CHARS 255

/* The kind of a term's root. */
typedef enum {
    TK_EXT_BAD = 0, /* refused */
    TK_EXT_ATOM,
    TK_EXT_PID,
    TK_EXT_PORT,
    TK_EXT_NIL,
    TK_EXT_OTHER
} tk_ext_kind;

/* Checks one external term: the version byte 131, then the term, in
 * exactly len bytes. Its root's kind, or TK_EXT_BAD. */
tk_ext_kind tk_ext_check(const unsigned char *p, size_t len);

/* Whether a dictionary entry may be of this kind: what the writer makes
 * of a VM's immediate words (an atom, a local pid or port, []). */
static inline bool tk_ext_entry_ok(tk_ext_kind k)
{
    return k == TK_EXT_ATOM || k == TK_EXT_PID || k == TK_EXT_PORT || k == TK_EXT_NIL;
}

/* The longest dictionary entry: a pid (NEW_PID_EXT) of a node whose name
 * is 255 characters of 4 bytes, with the version byte. */
#define TK_EXT_ENTRY_MAX (1u + 1u + 3u + 4u * TK_EXT_MAX_ATOM_CHARS + 12u)

/* Decodes one UTF-8 character as Erlang takes it (binary_to_term in an
 * atom, /utf8 matching): no overlong forms, no surrogates, at most
 * U+10FFFF. Its byte length and *c, or 0 if none starts at p. The one
 * decoder of the readers (tk_ext_check, tracekit-cat's terms and text). */
size_t tk_utf8_next(const unsigned char *p, size_t n, uint32_t *c);

#endif
