/* SPDX-License-Identifier: BSD-3-Clause */
/* HMAC-SHA256 and randomness for the store's authentication (engine/store/auth.h), from libcrypto
 * when this libctrain was built with it (libssl-dev; CT_HAVE_CRYPTO), else none: a secret is then
 * refused where it is given. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "engine/store/auth.h"

#ifdef CT_HAVE_CRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

#define LABEL "ctrain-tcpstore-auth-v1 "

int ct_store_auth_random(uint8_t *out, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

#ifdef CT_HAVE_CRYPTO
int ct_store_auth_available(void)
{
    return 1;
}

int ct_store_auth_mac(const void *key, size_t klen, const char *side, const uint8_t a[CT_TCPSTORE_NONCE],
                      const uint8_t b[CT_TCPSTORE_NONCE], uint8_t mac[CT_TCPSTORE_MAC])
{
    uint8_t msg[sizeof(LABEL) + 16 + 2 * CT_TCPSTORE_NONCE];
    size_t ll = strlen(LABEL), sl = strlen(side), n = 0;
    unsigned int mlen = 0;

    if (sl > 16)
        return -1;
    memcpy(msg, LABEL, ll);
    memcpy(msg + ll, side, sl);
    n = ll + sl;
    memcpy(msg + n, a, CT_TCPSTORE_NONCE);
    memcpy(msg + n + CT_TCPSTORE_NONCE, b, CT_TCPSTORE_NONCE);
    n += 2 * CT_TCPSTORE_NONCE;
    if (!HMAC(EVP_sha256(), key, (int)klen, msg, n, mac, &mlen) || mlen != CT_TCPSTORE_MAC)
        return -1;
    return 0;
}

int ct_store_auth_equal(const uint8_t a[CT_TCPSTORE_MAC], const uint8_t b[CT_TCPSTORE_MAC])
{
    return CRYPTO_memcmp(a, b, CT_TCPSTORE_MAC) == 0;
}
#else
int ct_store_auth_available(void)
{
    return 0;
}

int ct_store_auth_mac(const void *key, size_t klen, const char *side, const uint8_t a[CT_TCPSTORE_NONCE],
                      const uint8_t b[CT_TCPSTORE_NONCE], uint8_t mac[CT_TCPSTORE_MAC])
{
    (void)key, (void)klen, (void)side, (void)a, (void)b;
    memset(mac, 0, CT_TCPSTORE_MAC);
    return -1;
}

int ct_store_auth_equal(const uint8_t a[CT_TCPSTORE_MAC], const uint8_t b[CT_TCPSTORE_MAC])
{
    (void)a, (void)b;
    return 0;
}
#endif
