#pragma once
// The wire format of the owner exchange (balanced, sparse_ps, and the device plan's meta), private:
// the index-part codes (COO, the owner's presence bitmap, Elias-Fano) and their sizes, the push and
// pull rules that pick one, how an index part is written, checked and decoded, and the owners' meta
// record. Sender and receiver compute every size from values both sides know (m, K, the index
// width), so a code never travels except in the meta. What the owner does with the rows (sum,
// merge) stays with the schemes (src/schemes/owner_stage.hpp); this file only says what the bytes are.
#include <cstdint>
#include <cstring>
#include <string>

#include "zen/detail/popcount.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/error.hpp"
#include "zen/types.hpp"

namespace zen::wire {

/// What every owner publishes before the pull (one small allgather; the device plan sends the same).
struct OwnerMeta {
  uint64_t result_rows;  // K_i: positions in owner i's result
  uint64_t pushed_rows;  // rows owner i received in the push (for push imbalance)
  uint64_t encoding;     // kEncCoo / kEncBitmap / kEncEf
};

/// Unaligned loads and stores of a T at any byte offset of a message.
template <typename T>
inline T load_as(const uint8_t* p) {
  T x;
  std::memcpy(static_cast<void*>(&x), p, sizeof(T));
  return x;
}
template <typename T>
inline void store_as(uint8_t* p, T x) {
  std::memcpy(p, static_cast<const void*>(&x), sizeof(T));
}

/// A COO key of isz (4 or 8) bytes, the k-th of `keys`.
inline uint64_t load_key(const uint8_t* keys, size_t k, size_t isz) {
  return isz == 4 ? load_as<uint32_t>(keys + 4 * k) : load_as<uint64_t>(keys + 8 * k);
}
inline void store_key(uint8_t* keys, size_t k, size_t isz, uint64_t q) {
  if (isz == 4) store_as<uint32_t>(keys + 4 * k, static_cast<uint32_t>(q));
  else store_as<uint64_t>(keys + 8 * k, q);
}

/// Wire codes of an index part (the owners' meta and the push messages agree on them).
constexpr uint8_t kEncCoo = 0, kEncBitmap = 1, kEncEf = 2;

inline const char* encoding_name(uint8_t e) { return e == kEncBitmap ? "bitmap" : e == kEncEf ? "ef" : "coo"; }

/// Name of the encodings e[0..n) other than e[skip]: the common one, or "mixed" ("coo" when none).
inline const char* encodings_name(const uint8_t* e, int n, int skip) {
  int first = -1;
  for (int p = 0; p < n; ++p) {
    if (p == skip) continue;
    if (first < 0) first = e[p];
    else if (e[p] != first) return "mixed";
  }
  return encoding_name(first < 0 ? kEncCoo : static_cast<uint8_t>(first));
}

/// Bytes of the index part of K positions out of m in encoding `e`.
inline size_t index_part_bytes(uint8_t e, uint64_t m, uint64_t K, size_t isz) {
  if (e == kEncBitmap) return static_cast<size_t>((m + 7) / 8);
  if (e == kEncEf) return encode::ef_bytes(m, K);
  return static_cast<size_t>(K) * isz;
}

/// The pull rule: a forced encoding, or (Auto) the smallest index part, ties to the simpler code.
inline uint8_t pick_encoding(IndexEncoding opt, uint64_t m, uint64_t K, size_t isz) {
  if (opt == IndexEncoding::Coo) return kEncCoo;
  if (opt == IndexEncoding::Bitmap) return kEncBitmap;
  if (opt == IndexEncoding::EliasFano) return kEncEf;
  uint8_t best = kEncCoo;
  size_t b = index_part_bytes(kEncCoo, m, K, isz);
  for (uint8_t e : {kEncBitmap, kEncEf}) {
    const size_t x = index_part_bytes(e, m, K, isz);
    if (x < b) {
      best = e;
      b = x;
    }
  }
  return best;
}

/// The push rule: Auto keeps COO unless a sorted encoding saves at least 1/8 of the message of K
/// rows of rb bytes (the sender may have to sort its keys for it); forced encodings as in the pull.
/// Owner sets of more than 2^32 positions always push COO.
inline uint8_t pick_push_encoding(IndexEncoding opt, uint64_t m, uint64_t K, size_t isz, size_t rb) {
  if (m > (uint64_t{1} << 32)) return kEncCoo;  // balanced sorts (position << 32 | row) records
  const uint8_t e = pick_encoding(opt, m, K, isz);
  if (opt != IndexEncoding::Auto || e == kEncCoo) return e;
  const size_t coo = static_cast<size_t>(K) * (isz + rb), alt = index_part_bytes(e, m, K, isz) + static_cast<size_t>(K) * rb;
  return (coo - alt) * 8 >= coo ? e : kEncCoo;
}

/// Write the index part of K ascending positions pos(0..K-1) < m in encoding e (COO: isz-byte keys).
template <typename G>
void write_index_part(uint8_t e, uint8_t* out, uint64_t m, uint64_t K, size_t isz, G&& pos) {
  if (e == kEncBitmap) {
    const size_t nb = static_cast<size_t>((m + 7) / 8);
    if (nb) std::memset(out, 0, nb);
    for (uint64_t j = 0; j < K; ++j) {
      const uint64_t q = pos(j);
      out[q >> 3] = static_cast<uint8_t>(out[q >> 3] | (1u << (q & 7)));
    }
  } else if (e == kEncEf) {
    encode::EliasFanoWriter w(out, m, K);
    for (uint64_t j = 0; j < K; ++j) w.push(pos(j));
    w.finish();
  } else {
    for (uint64_t j = 0; j < K; ++j) store_key(out, j, isz, pos(j));
  }
}

/// Validate a received bitmap / Elias-Fano index part of K positions out of m and decode it into K
/// keys of isz bytes. False when it is malformed (wrong count, padding, order, range).
inline bool decode_index_part(uint8_t e, const uint8_t* in, uint64_t m, uint64_t K, size_t isz, uint8_t* keys) {
  if (e == kEncEf)
    return encode::ef_check_frame(in, encode::ef_bytes(m, K), m, K) &&
           encode::ef_for_each_checked(in, m, K, [&](uint64_t q, uint64_t j) { store_key(keys, j, isz, q); });
  const size_t nb = static_cast<size_t>((m + 7) / 8), words = (nb + 7) / 8;
  if (m % 8 && (in[m / 8] >> (m % 8))) return false;
  uint64_t j = 0;
  for (size_t i = 0; i < words; ++i) {
    uint64_t x = 0;
    std::memcpy(&x, in + i * 8, nb - i * 8 < 8 ? nb - i * 8 : 8);
    while (x) {
      if (j == K) return false;
      store_key(keys, j++, isz, i * 64 + static_cast<uint64_t>(__builtin_ctzll(x)));
      x &= x - 1;
    }
  }
  return j == K;
}

/// Check an owner's pull message of `K` rows over `m` positions: a bitmap must have exactly K bits
/// set and clear padding; COO positions must be < m; Elias-Fano must pass ef_check_frame (its order
/// and range are checked while for_positions decodes it). Throws InvalidUsage naming the owner.
inline void check_pull_message(const uint8_t* msg, uint8_t enc, uint64_t m, uint64_t K, size_t isz, int me, int owner,
                               const char* scheme) {
  bool ok = true;
  const bool bitmap = enc == kEncBitmap;
  if (enc > kEncEf) {
    ok = false;
  } else if (enc == kEncEf) {
    ok = encode::ef_check_frame(msg, encode::ef_bytes(m, K), m, K);  // order and range: for_positions
  } else if (bitmap) {
    const size_t nb = static_cast<size_t>((m + 7) / 8);
    ok = detail::popcount_bytes(msg, nb) == K && !(m % 8 && (msg[m / 8] >> (m % 8)));
  } else {
    for (uint64_t k = 0; k < K && ok; ++k) ok = load_key(msg, k, isz) < m;
  }
  if (!ok)
    ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " pull: owner " + std::to_string(owner) +
                                        " sent a " + (bitmap ? "bitmap" : enc == kEncEf ? "Elias-Fano position set" : "position list") +
                                        " that does not match the " +
                                        std::to_string(K) + " rows it announced over a set of " + std::to_string(m));
}

/// f(position, k) for the K positions of an owner's pull message (checked by check_pull_message),
/// ascending. An Elias-Fano message is checked for order and range here, in the same pass: a
/// violation throws InvalidUsage naming the owner (f is not called for the bad position).
template <typename F>
void for_positions(const uint8_t* msg, uint8_t enc, uint64_t m, uint64_t K, size_t isz, F&& f, int me = -1,
                   int owner = -1, const char* scheme = "") {
  if (enc == kEncEf) {
    if (!encode::ef_for_each_checked(msg, m, K, f))
      ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " pull: owner " + std::to_string(owner) +
                                          " sent an Elias-Fano position set that is not strictly increasing within [0, " +
                                          std::to_string(m) + ")");
  } else if (enc == kEncBitmap) {
    const size_t nb = static_cast<size_t>((m + 7) / 8), words = (nb + 7) / 8;
    uint64_t k = 0;
    for (size_t i = 0; i < words; ++i) {
      uint64_t x = 0;
      std::memcpy(&x, msg + i * 8, nb - i * 8 < 8 ? nb - i * 8 : 8);
      while (x) {
        f(i * 64 + static_cast<uint64_t>(__builtin_ctzll(x)), k++);
        x &= x - 1;
      }
    }
  } else {
    for (uint64_t k = 0; k < K; ++k) f(load_key(msg, k, isz), k);
  }
}

}  // namespace zen::wire
