/* The explicit engine's loops that numpy cannot do in one pass, in C (checker/native.py loads
 * this through ctypes; scripts/setup.sh and `pip install` build it with the project): the
 * visited set's membership test and merge, the packing and reading of sort keys, the merge of
 * a level's sorted parts, the steps of action instances whose writes are all constants.
 *
 * numpy has no merge of two sorted arrays, nor a search that walks forward through sorted
 * queries, and it takes several passes (and temporaries) for what is one pass here. Every
 * function is one forward or backward walk; see checker/native.py for what each computes. */
#include <stdint.h>
#include <stddef.h>

/* The first index i >= lo with V[i] >= x (n when none), galloping forward from lo: a query
 * that lands near the previous one touches a few cache lines, not log2(n) scattered ones. */
static int64_t lower_bound(const uint64_t *V, int64_t lo, int64_t n, uint64_t x)
{
    if (lo >= n || V[lo] >= x)
        return lo;
    int64_t prev = lo, step = 1, cur = lo + 1;      /* V[prev] < x */
    while (cur < n && V[cur] < x) {
        prev = cur;
        step *= 2;
        cur = prev + step;
    }
    int64_t hi = cur < n ? cur : n;
    lo = prev + 1;
    while (lo < hi) {
        int64_t mid = lo + ((hi - lo) >> 1);
        if (V[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* out[i] = 1 when the state u[i] (with keys uk[r * ustride + i], r < nkeys) is not among the
 * first n of V (keys K[r * kstride + j]). Fastest when u is sorted. */
void kc_absent(const uint64_t *V, const uint64_t *K, int64_t kstride, int64_t nkeys, int64_t n,
               const uint64_t *u, const uint64_t *uk, int64_t ustride, int64_t m, uint8_t *out)
{
    int64_t j = 0;
    for (int64_t i = 0; i < m; i++) {
        uint64_t x = u[i];
        if (i && x < u[i - 1])          /* queries out of order (a reduction's block) */
            j = 0;
        j = lower_bound(V, j, n, x);
        int found = 0;
        for (int64_t at = j; at < n && V[at] == x; at++) {   /* every state of this fingerprint */
            int same = 1;
            for (int64_t r = 0; r < nkeys; r++)
                if (K[r * kstride + at] != uk[r * ustride + i]) {
                    same = 0;
                    break;
                }
            if (same) {
                found = 1;
                break;
            }
        }
        out[i] = !found;
    }
}

/* The sorted new states (none present) merged into the first n of V, in place, from the back:
 * each old state moves up by the number of new ones before it, and a new state goes before the
 * old ones with its fingerprint (np.searchsorted's left side). */
void kc_merge(uint64_t *V, uint64_t *K, int64_t kstride, int64_t nkeys, int64_t n,
              const uint64_t *nw, const uint64_t *nk, int64_t nstride, int64_t m)
{
    int64_t i = n - 1, w = n + m - 1;
    for (int64_t j = m - 1; j >= 0; j--) {
        uint64_t x = nw[j];
        while (i >= 0 && V[i] >= x) {
            V[w] = V[i];
            for (int64_t r = 0; r < nkeys; r++)
                K[r * kstride + w] = K[r * kstride + i];
            w--;
            i--;
        }
        V[w] = x;
        for (int64_t r = 0; r < nkeys; r++)
            K[r * kstride + w] = nk[r * nstride + j];
        w--;
    }
}

/* key[i] = fp[i] << b | i */
void kc_pack_positions(const uint64_t *fp, int64_t n, int64_t b, uint64_t *key)
{
    for (int64_t i = 0; i < n; i++)
        key[i] = (fp[i] << b) | (uint64_t)i;
}

/* The positions (low b bits) of the first word of each run of equal values (high bits) of the
 * sorted key -> how many. */
int64_t kc_first_positions(const uint64_t *key, int64_t n, int64_t b, int64_t *out)
{
    uint64_t mask = (((uint64_t)1) << b) - 1, prev = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = key[i] >> b;
        if (i == 0 || v != prev) {
            out[m++] = (int64_t)(key[i] & mask);
            prev = v;
        }
    }
    return m;
}

/* key[i] = fp[i] << tag_bits | action[i] << run_bits | run of i (runs start at starts[r]);
 * action: integers of action_size bytes (1, 2 or 4), none negative */
void kc_pack_runs(const uint64_t *fp, const void *action, int64_t action_size,
                  const int64_t *starts, int64_t runs, int64_t tag_bits, int64_t run_bits,
                  uint64_t *key)
{
    for (int64_t r = 0; r < runs; r++)
        for (int64_t i = starts[r]; i < starts[r + 1]; i++) {
            uint64_t a = action_size == 1 ? ((const uint8_t *)action)[i]
                       : action_size == 2 ? ((const uint16_t *)action)[i]
                       : ((const uint32_t *)action)[i];
            key[i] = (fp[i] << tag_bits) | (a << run_bits) | (uint64_t)r;
        }
}

/* The position of the first word of each run of equal values of the sorted key, where a word's
 * low run_bits are its run: a run being sorted, the k-th time run r appears is its k-th
 * element. seen: one zeroed counter per run. -> how many. */
int64_t kc_first_in_runs(const uint64_t *key, int64_t n, int64_t tag_bits, int64_t run_bits,
                         const int64_t *starts, int64_t *seen, int32_t *out32, int64_t *out64)
{
    uint64_t run_mask = (((uint64_t)1) << run_bits) - 1, prev = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = key[i];
        int64_t r = (int64_t)(k & run_mask);
        uint64_t v = k >> tag_bits;
        if (i == 0 || v != prev) {
            int64_t at = starts[r] + seen[r];
            if (out32)
                out32[m] = (int32_t)at;
            else
                out64[m] = at;
            m++;
            prev = v;
        }
        seen[r]++;
    }
    return m;
}

/* The version of this file's functions that checker/native.py expects (its ABI). */
int64_t kc_abi(void) { return 4; }

/* The steps of one action instance whose writes are all constants, from the states of a block
 * (word w of state i at S[w * sstride + i]): the successor's word w is (S[w] & keep[w]) |
 * set[w]. Only the states whose mask byte is set (every state when mask is NULL); a step whose
 * successor is its state is left out unless keep_loops. Writes the successors (T, row stride
 * tstride), their states' positions (parent) and the instance k (action, of action_size bytes)
 * from 0 -> how many. T has room for one column per state of the mask. */
int64_t kc_expand_constant(const uint64_t *S, int64_t sstride, int64_t nwords, int64_t m,
                           const uint8_t *mask, const uint64_t *keep, const uint64_t *set,
                           int64_t keep_loops, uint64_t *T, int64_t tstride, int64_t *parent,
                           void *action, int64_t action_size, int64_t k)
{
    int64_t fill = 0;
    for (int64_t i = 0; i < m; i++) {
        if (mask && !mask[i])
            continue;
        uint64_t moved = 0;
        for (int64_t w = 0; w < nwords; w++) {
            uint64_t s = S[w * sstride + i], t = (s & keep[w]) | set[w];
            T[w * tstride + fill] = t;
            moved |= t ^ s;
        }
        if (moved || keep_loops) {
            parent[fill] = i;
            if (action_size == 2)
                ((int16_t *)action)[fill] = (int16_t)k;
            else
                ((int32_t *)action)[fill] = (int32_t)k;
            fill++;
        }
    }
    return fill;
}

static inline uint64_t action_at(const void *a, int64_t size, int64_t i)
{
    return size == 2 ? ((const uint16_t *)a)[i] : ((const uint32_t *)a)[i];
}

static inline void action_put(void *a, int64_t size, int64_t i, uint64_t v)
{
    if (size == 2)
        ((uint16_t *)a)[i] = (uint16_t)v;
    else
        ((uint32_t *)a)[i] = (uint32_t)v;
}

/* Two sorted runs of distinct one-word states merged into one: A, the level gathered so far,
 * and B, from the blocks after it. A state in both keeps B's (parent, action instance) only when
 * B's action instance is lower (at equal ones A's parent comes first). Writes the merged states,
 * parents and action instances (of action_size bytes) -> how many. */
int64_t kc_merge_runs(const uint64_t *afp, const int32_t *apar, const void *aact, int64_t na,
                      const uint64_t *bfp, const int32_t *bpar, const void *bact, int64_t nb,
                      int64_t action_size, uint64_t *ofp, int32_t *opar, void *oact)
{
    int64_t i = 0, j = 0, o = 0;
    while (i < na && j < nb) {
        uint64_t x = afp[i], y = bfp[j];
        if (x < y) {
            ofp[o] = x; opar[o] = apar[i]; action_put(oact, action_size, o, action_at(aact, action_size, i));
            i++;
        } else if (y < x) {
            ofp[o] = y; opar[o] = bpar[j]; action_put(oact, action_size, o, action_at(bact, action_size, j));
            j++;
        } else {
            uint64_t ka = action_at(aact, action_size, i), kb = action_at(bact, action_size, j);
            ofp[o] = x;
            if (kb < ka) {
                opar[o] = bpar[j]; action_put(oact, action_size, o, kb);
            } else {
                opar[o] = apar[i]; action_put(oact, action_size, o, ka);
            }
            i++;
            j++;
        }
        o++;
    }
    for (; i < na; i++, o++) {
        ofp[o] = afp[i]; opar[o] = apar[i]; action_put(oact, action_size, o, action_at(aact, action_size, i));
    }
    for (; j < nb; j++, o++) {
        ofp[o] = bfp[j]; opar[o] = bpar[j]; action_put(oact, action_size, o, action_at(bact, action_size, j));
    }
    return o;
}

/* A block's first occurrences gathered in one pass: key is the sorted (state << b | position)
 * of kc_pack_positions; for the first word of each run of equal states, writes the state, the
 * parent position plus offset (int32) and the action instance (action_size bytes) -> how many.
 * numpy took a gather of each array, an addition and a conversion for this. */
int64_t kc_first_gather(const uint64_t *key, int64_t n, int64_t b, const int64_t *parent,
                        const void *action, int64_t action_size, int64_t offset,
                        uint64_t *ofp, int32_t *opar, void *oact)
{
    uint64_t mask = (((uint64_t)1) << b) - 1, prev = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = key[i] >> b;
        if (i == 0 || v != prev) {
            int64_t at = (int64_t)(key[i] & mask);
            ofp[m] = v;
            opar[m] = (int32_t)(parent[at] + offset);
            action_put(oact, action_size, m, action_at(action, action_size, at));
            m++;
            prev = v;
        }
    }
    return m;
}

/* key[...] = fp << tag_bits | action << run_bits | r for every element of the runs r < k (run
 * r: run_fp[r], run_act[r], run_len[r] elements; actions of action_size bytes), written run
 * after run: the runs are read where they lie, never joined. */
void kc_pack_run_list(const uint64_t *const *run_fp, const void *const *run_act,
                      const int64_t *run_len, int64_t k, int64_t action_size, int64_t tag_bits,
                      int64_t run_bits, uint64_t *key)
{
    int64_t o = 0;
    for (int64_t r = 0; r < k; r++) {
        const uint64_t *fp = run_fp[r];
        const void *act = run_act[r];
        for (int64_t i = 0; i < run_len[r]; i++)
            key[o++] = (fp[i] << tag_bits) | (action_at(act, action_size, i) << run_bits) | (uint64_t)r;
    }
}

/* A level's runs collapsed into its states so far, in one pass over the sorted keys of
 * kc_pack_run_list: for each state (key >> tag_bits) its least (action instance, run) (the
 * first key of the state), the parent found by a counter per run (a run is sorted: the j-th
 * time run r appears is its j-th element, run_par[r][j]); a state among the first vn of the
 * sorted visited set V is dropped (a forward galloping walk); the rest are merged with the
 * level gathered before (bfp, bpar, bact: sorted, distinct, not visited, from earlier blocks:
 * at equal action instances its parent is the lower) into ofp, opar, oact -> how many. seen:
 * k zeroed counters. */
int64_t kc_collapse(const uint64_t *key, int64_t n, int64_t tag_bits, int64_t run_bits,
                    const int32_t *const *run_par, int64_t *seen, const uint64_t *V, int64_t vn,
                    const uint64_t *bfp, const int32_t *bpar, const void *bact, int64_t nb,
                    int64_t action_size, uint64_t *ofp, int32_t *opar, void *oact)
{
    uint64_t run_mask = (((uint64_t)1) << run_bits) - 1;
    uint64_t action_mask = (((uint64_t)1) << (tag_bits - run_bits)) - 1;
    uint64_t prev = 0;
    int64_t o = 0, i = 0, j = 0;
    for (int64_t q = 0; q < n; q++) {
        uint64_t k = key[q];
        int64_t r = (int64_t)(k & run_mask);
        uint64_t v = k >> tag_bits;
        int64_t at = seen[r]++;
        if (q && v == prev)
            continue;
        prev = v;
        j = lower_bound(V, j, vn, v);
        if (j < vn && V[j] == v)
            continue;                                   /* seen at an earlier level */
        while (i < nb && bfp[i] < v) {
            ofp[o] = bfp[i]; opar[o] = bpar[i];
            action_put(oact, action_size, o, action_at(bact, action_size, i));
            i++; o++;
        }
        uint64_t a = (k >> run_bits) & action_mask;
        ofp[o] = v;
        if (i < nb && bfp[i] == v) {
            uint64_t ka = action_at(bact, action_size, i);
            if (a < ka) {
                opar[o] = run_par[r][at]; action_put(oact, action_size, o, a);
            } else {
                opar[o] = bpar[i]; action_put(oact, action_size, o, ka);
            }
            i++;
        } else {
            opar[o] = run_par[r][at]; action_put(oact, action_size, o, a);
        }
        o++;
    }
    for (; i < nb; i++, o++) {
        ofp[o] = bfp[i]; opar[o] = bpar[i];
        action_put(oact, action_size, o, action_at(bact, action_size, i));
    }
    return o;
}
