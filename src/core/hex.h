/* Lowercase hexadecimal, both ways (keys, digests and ids kept as text). */
#ifndef OL_CORE_HEX_H
#define OL_CORE_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* n bytes as 2n lowercase hex digits and a NUL into out (2n + 1 bytes). */
void ol_hex(const uint8_t *b, size_t n, char *out);
/* Exactly n bytes from exactly 2n hex digits at p (plen of them; lowercase
 * or uppercase); false for any other length or a non-hex digit. */
bool ol_unhex(const char *p, size_t plen, uint8_t *out, size_t n);

#endif
