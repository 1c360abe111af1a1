/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP store's optional shared-secret authentication (issue 48 item 3), both halves: HMAC-SHA256
 * from libcrypto (OpenSSL), nothing written by hand. Without a secret none of it runs and the wire
 * is PyTorch's TCPStore protocol, byte for byte.
 *
 * After VALIDATE, a client that holds the secret K sends AUTH_HELLO and a 32-byte random nonce c;
 * the server answers its own nonce s and HMAC(K, "ctrain-tcpstore-auth-v1 server" c s), which the
 * client checks (the store is the job's, not one planted at MASTER_ADDR:PORT); the client sends
 * AUTH_PROOF and HMAC(K, "ctrain-tcpstore-auth-v1 client" s c); the server answers one byte, 0
 * (every query may follow) or 1 (then it drops the connection). The labels keep one side's answer
 * from serving as the other's; fresh nonces on both sides keep an answer from being replayed. A
 * store with a secret drops, with a logged reason, any client that sends another query first, a
 * wrong proof, or nothing within the handshake's deadline. */
#ifndef CTRAIN_STORE_AUTH_H
#define CTRAIN_STORE_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* ctrain's own query types, outside PyTorch's range: only a store with a secret knows them. */
#define CT_TCPSTORE_AUTH_HELLO 0xA0
#define CT_TCPSTORE_AUTH_PROOF 0xA1
#define CT_TCPSTORE_NONCE 32
#define CT_TCPSTORE_MAC 32

/* 1 when this libctrain was built with libcrypto. */
int ct_store_auth_available(void);
/* n random bytes (the kernel's); -1 when none could be had. */
int ct_store_auth_random(uint8_t *out, size_t n);
/* HMAC-SHA256(key, "ctrain-tcpstore-auth-v1 " side a b) into mac; -1 on failure. */
int ct_store_auth_mac(const void *key, size_t klen, const char *side, const uint8_t a[CT_TCPSTORE_NONCE],
                      const uint8_t b[CT_TCPSTORE_NONCE], uint8_t mac[CT_TCPSTORE_MAC]);
/* 1 when the two MACs are equal, compared in constant time. */
int ct_store_auth_equal(const uint8_t a[CT_TCPSTORE_MAC], const uint8_t b[CT_TCPSTORE_MAC]);

#endif
