#include "tk_tags.h"

#define TK_TAG_ENTRY(name, part) {#name, part},
const tk_tag tk_tags[TK_TAG_COUNT] = {TK_TAG_LIST(TK_TAG_ENTRY)};
#undef TK_TAG_ENTRY
