/*
 * md2.c - the MD2 message digest (RFC 1319) and HMAC over it (RFC 2104,
 * with MD2's 16-byte block), for the runtime's integrity check
 * (integrity.c).
 *
 * Divided into: the substitution table; the digest (init, update, final,
 * or all at once); HMAC.  MD2 is long broken as a hash; the runtime uses it as a handshake,
 * and so does simgpu.
 *
 * No state beyond the caller's, no lock.  It depends on nothing else in
 * sim/, so tests link it alone to check it against the RFC's examples.
 */
#include "sim.h"

#include <string.h>

/* ---- the substitution table ----------------------------------------------------
 * RFC 1319's permutation of 0..255 made from the digits of pi. */
static const uint8_t S[256] = {
     41,  46,  67, 201, 162, 216, 124,   1,  61,  54,  84, 161, 236, 240,   6,  19,
     98, 167,   5, 243, 192, 199, 115, 140, 152, 147,  43, 217, 188,  76, 130, 202,
     30, 155,  87,  60, 253, 212, 224,  22, 103,  66, 111,  24, 138,  23, 229,  18,
    190,  78, 196, 214, 218, 158, 222,  73, 160, 251, 245, 142, 187,  47, 238, 122,
    169, 104, 121, 145,  21, 178,   7,  63, 148, 194,  16, 137,  11,  34,  95,  33,
    128, 127,  93, 154,  90, 144,  50,  39,  53,  62, 204, 231, 191, 247, 151,   3,
    255,  25,  48, 179,  72, 165, 181, 209, 215,  94, 146,  42, 172,  86, 170, 198,
     79, 184,  56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116,   4, 241,
     69, 157, 112,  89, 100, 113, 135,  32, 134,  91, 207, 101, 230,  45, 168,   2,
     27,  96,  37, 173, 174, 176, 185, 246,  28,  70,  97, 105,  52,  64, 126,  15,
     85,  71, 163,  35, 221,  81, 175,  58, 195,  92, 249, 206, 186, 197, 234,  38,
     44,  83,  13, 110, 133,  40, 132,   9, 211, 223, 205, 244,  65, 129,  77,  82,
    106, 220,  55, 200, 108, 193, 171, 250,  36, 225, 123,   8,  12, 189, 177,  74,
    120, 136, 149, 139, 227,  99, 232, 109, 233, 203, 213, 254,  59,   0,  29,  57,
    242, 239, 183,  14, 102,  88, 208, 228, 166, 119, 114, 248, 235, 117,  75,  10,
     49,  68,  80, 180, 143, 237,  31,  26, 219, 153, 141,  51, 159,  17, 131,  20,
};

/* ---- the digest --------------------------------------------------------------------
 * State: x (48 bytes, of which the first 16 are the digest so far), the
 * running checksum c and its last byte l, and the block being filled. */

void sim_md2_init(sim_md2_t *m)
{
    memset(m, 0, sizeof *m);
}

/* One 16-byte block: into the checksum, then 18 rounds over x. */
static void md2_block(sim_md2_t *m, const uint8_t *b)
{
    for (int j = 0; j < 16; j++) {
        m->c[j] ^= S[b[j] ^ m->l];
        m->l = m->c[j];
        m->x[16 + j] = b[j];
        m->x[32 + j] = (uint8_t)(b[j] ^ m->x[j]);
    }
    unsigned t = 0;
    for (unsigned round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++)
            t = m->x[k] ^= S[t];
        t = (t + round) & 0xff;
    }
}

void sim_md2_update(sim_md2_t *m, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        size_t take = sim_min(len, 16 - m->n);
        memcpy(m->buf + m->n, p, take);
        m->n += (unsigned)take;
        p += take;
        len -= take;
        if (m->n == 16) {
            md2_block(m, m->buf);
            m->n = 0;
        }
    }
}

/* Pad with i bytes of value i (1 to 16) to a whole block, then digest the
 * checksum as one more block. */
void sim_md2_final(sim_md2_t *m, uint8_t out[16])
{
    uint8_t pad = (uint8_t)(16 - m->n);
    memset(m->buf + m->n, pad, pad);
    md2_block(m, m->buf);
    uint8_t sum[16];
    memcpy(sum, m->c, 16);
    md2_block(m, sum);
    memcpy(out, m->x, 16);
}

void sim_md2(const void *data, size_t len, uint8_t out[16])
{
    sim_md2_t m;
    sim_md2_init(&m);
    sim_md2_update(&m, data, len);
    sim_md2_final(&m, out);
}

/* ---- HMAC ---------------------------------------------------------------------------
 * MD2((key ^ 0x5c..) || MD2((key ^ 0x36..) || msg)), the key one block. */
void sim_hmac_md2(const uint8_t key[16], const void *msg, size_t len, uint8_t out[16])
{
    uint8_t pad[16], inner[16];
    sim_md2_t m;
    for (int i = 0; i < 16; i++)
        pad[i] = key[i] ^ 0x36;
    sim_md2_init(&m);
    sim_md2_update(&m, pad, 16);
    sim_md2_update(&m, msg, len);
    sim_md2_final(&m, inner);
    for (int i = 0; i < 16; i++)
        pad[i] = key[i] ^ 0x5c;
    sim_md2_init(&m);
    sim_md2_update(&m, pad, 16);
    sim_md2_update(&m, inner, 16);
    sim_md2_final(&m, out);
}
