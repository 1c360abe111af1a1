/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM hostlists: expand and compress; see include/ctrain/hostlist.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "ctrain/hostlist.h"

/* Names live back to back in one buffer; off[i] is where name i starts. 100k names are then two
 * allocations that grow geometrically, not 100k mallocs. */
struct ct_hostlist {
    char *buf;
    size_t used, cap;
    size_t *off;
    size_t count, off_cap;
};

#define CT_HOSTLIST_MAX_TEXT "1048576" /* CT_HOSTLIST_MAX_HOSTS, for messages */
#define HOSTLIST_HINT "SLURM hostlists look like n[001-004,007], gpu-[1-2]-ib or r[1-2]n[1-4],login1"

/* One range of a bracket group: lo..hi printed with at least width digits. */
struct range {
    unsigned long lo, hi;
    int width;
};

/* One bracket group: its ranges and how many numbers they hold. */
struct group {
    struct range *ranges;
    size_t nranges, cap;
    size_t size;
};

/* A name split at its bracket groups: lit[0] group[0] lit[1] group[1] ... lit[ngroups]. */
struct pattern {
    const char *lit[65];
    size_t lit_len[65];
    struct group groups[64];
    size_t ngroups;
};

ct_hostlist *ct_hostlist_new(void)
{
    return calloc(1, sizeof(ct_hostlist));
}

void ct_hostlist_free(ct_hostlist *hl)
{
    if (!hl)
        return;
    free(hl->buf);
    free(hl->off);
    free(hl);
}

size_t ct_hostlist_count(const ct_hostlist *hl)
{
    return hl ? hl->count : 0;
}

const char *ct_hostlist_get(const ct_hostlist *hl, size_t i)
{
    if (!hl || i >= hl->count)
        return NULL;
    return hl->buf + hl->off[i];
}

long ct_hostlist_find(const ct_hostlist *hl, const char *name)
{
    for (size_t i = 0; hl && i < hl->count; i++)
        if (!strcmp(hl->buf + hl->off[i], name))
            return (long)i;
    return -1;
}

/* Most bytes of host names one list may hold: the host limit alone let a few kB of long names
 * with a large range ask for a gigabyte (inside srun and slurmstepd); 64 MiB is 1M names of 64. */
#define HOSTLIST_MAX_BYTES ((size_t)64 << 20)

static int push_n(ct_hostlist *hl, const char *host, size_t len, ct_error *err)
{
    if (hl->count >= CT_HOSTLIST_MAX_HOSTS) {
        ct_error_set(err, CT_EINVAL, "hostlist-too-long", "a hostlist may hold at most %u hosts",
                     CT_HOSTLIST_MAX_HOSTS);
        return ct_error_hint(err, "check the ranges in brackets for a typo (an extra digit)");
    }
    if (hl->used + len + 1 > HOSTLIST_MAX_BYTES) {
        ct_error_set(err, CT_EINVAL, "hostlist-too-long", "a hostlist may hold at most %zu MiB of host names",
                     HOSTLIST_MAX_BYTES >> 20);
        return ct_error_hint(err, "check the ranges in brackets for a typo (an extra digit)");
    }
    if (hl->used + len + 1 > hl->cap) {
        size_t cap = hl->cap ? hl->cap * 2 : 256;
        char *p;
        while (cap < hl->used + len + 1)
            cap *= 2;
        if (!(p = realloc(hl->buf, cap)))
            return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory expanding a hostlist");
        hl->buf = p;
        hl->cap = cap;
    }
    if (hl->count == hl->off_cap) {
        size_t cap = hl->off_cap ? hl->off_cap * 2 : 16;
        size_t *p = realloc(hl->off, cap * sizeof(*p));
        if (!p)
            return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory expanding a hostlist");
        hl->off = p;
        hl->off_cap = cap;
    }
    hl->off[hl->count++] = hl->used;
    memcpy(hl->buf + hl->used, host, len);
    hl->buf[hl->used + len] = '\0';
    hl->used += len + 1;
    return 0;
}

int ct_hostlist_push(ct_hostlist *hl, const char *host, ct_error *err)
{
    if (!*host || strpbrk(host, "[],"))
    {
        ct_error_set(err, CT_EINVAL, "hostlist-malformed", "'%s' is not a single host name", host);
        return ct_error_hint(err, "a host name is not empty and holds no '[', ']' or ','");
    }
    return push_n(hl, host, strlen(host), err);
}

/* --- expansion ------------------------------------------------------------------------------ */

static int malformed(ct_error *err, const char *expr, size_t pos, const char *what)
{
    ct_error_set(err, CT_EINVAL, "hostlist-malformed", "malformed hostlist '%s': %s at position %zu", expr,
                 what, pos + 1);
    return ct_error_hint(err, HOSTLIST_HINT);
}

static void free_pattern(struct pattern *p)
{
    for (size_t g = 0; g < p->ngroups; g++)
        free(p->groups[g].ranges);
    p->ngroups = 0;
}

/* Parse a number the way SLURM's strtoul-based parser does: blanks and one '+' before the digits
 * are allowed, at least one digit, at most 18 (no overflow). s[*i] is left after the digits. */
static int parse_number(const char *s, size_t *i, size_t end, unsigned long *v)
{
    size_t start;

    *v = 0;
    while (*i < end && (s[*i] == ' ' || s[*i] == '\t'))
        (*i)++;
    if (*i < end && s[*i] == '+')
        (*i)++;
    start = *i;
    while (*i < end && s[*i] >= '0' && s[*i] <= '9') {
        if (*i - start >= 18)
            return -1;
        *v = *v * 10 + (unsigned long)(s[*i] - '0');
        (*i)++;
    }
    return *i > start ? 0 : -1;
}

/* One item of a bracket group, expr[at..end): "lo" or "lo-hi". As in SLURM, the width is the
 * length of the text before '-' (blanks and '+' included: "[089, 100]" gives 089 and 0100), and
 * blanks may end lo when a hi follows ("[1 -2]"), but not a lone number ("[1 ]"). */
static int parse_item(const char *expr, size_t at, size_t end, struct range *r, ct_error *err)
{
    const char *dash = memchr(expr + at, '-', end - at);
    size_t lo_end = dash ? (size_t)(dash - expr) : end, i = at;

    if (at == end)
        return malformed(err, expr, at, expr[at] == ']' && expr[at - 1] == '[' ? "empty brackets" :
                                        expr[at] == ']' ? "',' before ']'" : "empty entry inside brackets");
    if (memchr(expr + at, 'x', end - at))
        return malformed(err, expr, at, "expected a number inside brackets ('x' boxes are not hostlists)");
    if (parse_number(expr, &i, lo_end, &r->lo))
        return malformed(err, expr, at, "expected a number of at most 18 digits inside brackets");
    while (i < lo_end && dash && (expr[i] == ' ' || expr[i] == '\t'))
        i++;
    if (i != lo_end)
        return malformed(err, expr, i, "unexpected character inside brackets");
    r->width = (int)(lo_end - at);
    r->hi = r->lo;
    if (!dash)
        return 0;
    i = lo_end + 1;
    if (parse_number(expr, &i, end, &r->hi))
        return malformed(err, expr, lo_end + 1, "expected the upper end of a range after '-'");
    if (i != end)
        return malformed(err, expr, i, "unexpected character inside brackets");
    if (r->hi < r->lo)
        return malformed(err, expr, lo_end + 1, "range runs backwards (upper end below lower end)");
    return 0;
}

/* Parse the bracket group whose '[' is at expr[*i]; leaves *i after the ']'. */
static int parse_group(const char *expr, size_t *i, struct group *g, ct_error *err)
{
    size_t open = *i, close = open + 1 + strcspn(expr + open + 1, "[]");

    memset(g, 0, sizeof(*g));
    if (expr[close] != ']')
        return malformed(err, expr, expr[close] ? close : open,
                         expr[close] ? "'[' inside brackets" : "'[' never closed");
    for (size_t at = open + 1; at <= close;) {
        size_t end = at + strcspn(expr + at, ",]");
        struct range r;
        int rc;

        if ((rc = parse_item(expr, at, end, &r, err)))
            return rc;
        if (r.hi - r.lo >= CT_HOSTLIST_MAX_HOSTS || g->size + (r.hi - r.lo + 1) > CT_HOSTLIST_MAX_HOSTS)
            return malformed(err, expr, at, "range holds more hosts than a hostlist may (" CT_HOSTLIST_MAX_TEXT ")");
        if (g->nranges == g->cap) { /* geometric growth: 100k ranges in one bracket stay linear */
            size_t cap = g->cap ? g->cap * 2 : 16;
            struct range *p = realloc(g->ranges, cap * sizeof(*p));
            if (!p)
                return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory parsing a hostlist");
            g->ranges = p;
            g->cap = cap;
        }
        g->ranges[g->nranges++] = r;
        g->size += r.hi - r.lo + 1;
        at = end + 1;
    }
    *i = close + 1;
    return 0;
}

/* Split the name at expr[*i] (up to a top-level ',' or the end) into literals and groups.
 * On error nothing stays allocated. */
static int parse_pattern(const char *expr, size_t *i, struct pattern *p, ct_error *err)
{
    size_t start = *i;
    int rc = 0;

    memset(p, 0, sizeof(*p));
    p->lit[0] = expr + *i;
    for (;;) {
        char c = expr[*i];
        if (c == '\0' || c == ',' || c == ' ' || c == '\t' || c == '\n')
            break;
        /* A ']' outside brackets is text, as in SLURM ("n[1-2]]" is n1] n2]). */
        if (c != '[') {
            p->lit_len[p->ngroups]++;
            (*i)++;
            continue;
        }
        if (p->ngroups == 64) {
            rc = malformed(err, expr, *i, "more than 64 bracket groups in one name");
            break;
        }
        if ((rc = parse_group(expr, i, &p->groups[p->ngroups], err))) {
            free(p->groups[p->ngroups].ranges);
            break;
        }
        p->ngroups++;
        p->lit[p->ngroups] = expr + *i;
    }
    if (!rc && *i == start)
        rc = malformed(err, expr, *i, "empty host name");
    /* Text after the last ']' is a suffix of every name ("node[1-2]-ib" is node1-ib node2-ib), as
     * SLURM takes it since 23.02.5; 22.05 refused such lists, and what a newer SLURM accepts is
     * accepted here (a site's SLURM hands ctrain the lists it makes). */
    if (rc)
        free_pattern(p);
    return rc;
}

/* Hosts a pattern stands for, or 0 when more than the limit. */
static size_t pattern_size(const struct pattern *p)
{
    size_t n = 1;

    for (size_t g = 0; g < p->ngroups; g++) {
        if (p->groups[g].size > CT_HOSTLIST_MAX_HOSTS / n)
            return 0;
        n *= p->groups[g].size;
    }
    return n;
}

/* Where the odometer stands in one group: which range, which number in it. */
struct digit {
    size_t range;
    unsigned long value;
};

/* Advance one group; returns 1 when it wrapped around to its first number (carry). */
static int digit_next(const struct group *g, struct digit *d)
{
    if (d->value < g->ranges[d->range].hi) {
        d->value++;
        return 0;
    }
    if (d->range + 1 < g->nranges) {
        d->range++;
        d->value = g->ranges[d->range].lo;
        return 0;
    }
    d->range = 0;
    d->value = g->ranges[0].lo;
    return 1;
}

static int expand_pattern(ct_hostlist *hl, const struct pattern *p, size_t total, ct_error *err)
{
    struct digit dig[64];
    char name[1024];
    int rc;

    for (size_t g = 0; g < p->ngroups; g++) {
        dig[g].range = 0;
        dig[g].value = p->groups[g].ranges[0].lo;
    }
    for (size_t h = 0; h < total; h++) {
        size_t len = 0;
        for (size_t g = 0; g <= p->ngroups; g++) {
            if (len + p->lit_len[g] + 24 >= sizeof(name))
                return ct_error_set(err, CT_EINVAL, "hostlist-malformed", "a host name in the hostlist is longer "
                                    "than %zu characters", sizeof(name) - 24);
            memcpy(name + len, p->lit[g], p->lit_len[g]);
            len += p->lit_len[g];
            if (g < p->ngroups)
                len += (size_t)snprintf(name + len, sizeof(name) - len, "%0*lu",
                                        p->groups[g].ranges[dig[g].range].width, dig[g].value);
        }
        if ((rc = push_n(hl, name, len, err)))
            return rc;
        /* Odometer in SLURM's order: the last group turns fastest, then the first, the second, ...
         * and the one before the last slowest ("a[1-2]b[1-2]c[1-2]" is a1b1c1 a1b1c2 a2b1c1 ...). */
        if (p->ngroups && digit_next(&p->groups[p->ngroups - 1], &dig[p->ngroups - 1]))
            for (size_t g = 0; g + 1 < p->ngroups; g++)
                if (!digit_next(&p->groups[g], &dig[g]))
                    break;
    }
    return 0;
}

int ct_hostlist_expand(const char *expr, ct_hostlist **out, ct_error *err)
{
    ct_hostlist *hl;
    size_t i = 0;
    int rc = CT_EINVAL;

    *out = NULL;
    if (!expr || !*expr) {
        ct_error_set(err, CT_EINVAL, "hostlist-malformed", "empty hostlist");
        return ct_error_hint(err, HOSTLIST_HINT);
    }
    if (!(hl = ct_hostlist_new()))
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory expanding a hostlist");
    while (expr[i]) {
        struct pattern p;
        size_t total;

        /* SLURM splits at commas and blanks and skips empty names (",n1,,n2," is n1 n2). */
        if (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == ',') {
            i++;
            continue;
        }
        if ((rc = parse_pattern(expr, &i, &p, err)))
            goto fail;
        total = pattern_size(&p);
        if (!total || hl->count + total > CT_HOSTLIST_MAX_HOSTS) {
            free_pattern(&p);
            rc = malformed(err, expr, i - 1, "expands to more hosts than a hostlist may (" CT_HOSTLIST_MAX_TEXT ")");
            goto fail;
        }
        rc = expand_pattern(hl, &p, total, err);
        free_pattern(&p);
        if (rc)
            goto fail;
    }
    if (!hl->count) {
        ct_error_set(err, CT_EINVAL, "hostlist-malformed", "malformed hostlist '%s': no host name in it", expr);
        rc = ct_error_hint(err, HOSTLIST_HINT);
        goto fail;
    }
    *out = hl;
    return 0;
fail:
    if (err && rc != CT_ENOMEM && !strstr(err->msg, expr))
        ct_error_prefix(err, "hostlist '%s': ", expr);
    ct_hostlist_free(hl);
    return rc;
}

/* --- compression ---------------------------------------------------------------------------- */

/* A host split into prefix and numeric suffix. has_num = 0 when it does not end in a digit. */
struct split {
    const char *name;
    size_t prefix_len;
    int has_num;
    unsigned long num;
    int digits;
    int padded;   /* suffix has a leading zero and more than one digit: its width is fixed */
};

static void split_host(const char *name, struct split *s)
{
    size_t len = strlen(name), d = len;

    s->name = name;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
    s->prefix_len = d;
    s->digits = (int)(len - d);
    s->has_num = s->digits > 0 && s->digits <= 18;
    if (!s->has_num)
        s->prefix_len = len;
    s->num = 0;
    for (size_t k = d; s->has_num && k < len; k++)
        s->num = s->num * 10 + (unsigned long)(name[k] - '0');
    s->padded = s->has_num && s->digits > 1 && name[d] == '0';
}

/* A growing output string. */
struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (!(p = realloc(b->s, cap))) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_num(struct sbuf *b, unsigned long v, int width)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%0*lu", width, v);
    sb_add(b, tmp, (size_t)n);
}

/* Can host s extend the range lo..hi (width w, 0 = free) of the same prefix? */
static int extends(const struct split *s, unsigned long hi, int w)
{
    if (!s->has_num || s->num != hi + 1)
        return 0;
    if (w)
        return s->digits == w;
    return !s->padded;
}

int ct_hostlist_compress(const ct_hostlist *hl, char **out, ct_error *err)
{
    struct sbuf b = {0};
    size_t n = ct_hostlist_count(hl), i = 0;

    sb_add(&b, "", 0);
    while (i < n) {
        struct split first;
        size_t nranges = 0, j;
        struct sbuf inner = {0};

        split_host(ct_hostlist_get(hl, i), &first);
        if (b.len)
            sb_add(&b, ",", 1);
        sb_add(&b, first.name, first.prefix_len);
        if (!first.has_num) {
            i++;
            continue;
        }
        /* Ranges of this prefix, for as long as the hosts keep it. */
        j = i;
        while (j < n) {
            struct split s;
            unsigned long lo, hi;
            int w;

            split_host(ct_hostlist_get(hl, j), &s);
            if (!s.has_num || s.prefix_len != first.prefix_len || memcmp(s.name, first.name, s.prefix_len))
                break;
            lo = hi = s.num;
            w = s.padded ? s.digits : 0;
            for (j++; j < n; j++) {
                struct split t;
                split_host(ct_hostlist_get(hl, j), &t);
                if (t.prefix_len != s.prefix_len || memcmp(t.name, s.name, s.prefix_len) || !extends(&t, hi, w))
                    break;
                hi = t.num;
            }
            if (nranges++)
                sb_add(&inner, ",", 1);
            sb_num(&inner, lo, w ? w : s.digits);
            if (hi != lo) {
                sb_add(&inner, "-", 1);
                sb_num(&inner, hi, w);
            }
        }
        if (nranges == 1 && !strchr(inner.s, '-')) {
            sb_add(&b, inner.s, inner.len);
        } else {
            sb_add(&b, "[", 1);
            sb_add(&b, inner.s, inner.len);
            sb_add(&b, "]", 1);
        }
        b.oom |= inner.oom;
        free(inner.s);
        i = j;
    }
    if (b.oom) {
        free(b.s);
        *out = NULL;
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory compressing a hostlist");
    }
    *out = b.s;
    return 0;
}
