// tests/fuzz/recording_pieces.hpp -- a format-3 recording as a list of chunks, for mutating
// fields and writing the file back with every checksum right (fuzz_recording_format.cpp)
//
// Byte-level mutation of a recording almost always breaks a CRC, and the reader stops there:
// the digest parser, the index walk, the string table and the sample decoder behind the
// checksums are rarely reached. Here a file is split at its chunks (header, packed 'K'/'C'
// chunks, index 'I' chunks, and whatever does not parse as one, kept as raw bytes), a mutation
// changes fields of one chunk or the order of chunks, and join() writes the file back with the
// real compressor (PackedChunkCompressor) and headers, checks and CRCs recomputed here, so
// the damage is what a forger would make: valid checksums around impossible content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace vramscope::fuzz {

/// One chunk of a recording, or the header, or bytes that are neither.
struct Piece {
  enum class Kind { Header, Packed, Index, Raw };
  Kind kind = Kind::Raw;
  std::string bytes;
};

/// Splits `file` at its chunks; pieces join() back to exactly `file`. A file that is not a
/// recording of the current version (packed chunks and index chunks, as since version 3) is one
/// Raw piece.
std::vector<Piece> split_recording(std::string_view file);

/// The pieces' bytes, concatenated.
std::string join(const std::vector<Piece>& pieces);

/// Replaces the digest that the index chunk `piece` stores (compressed, with its sizes); false
/// when `piece` is no index chunk.
bool set_index_digest(Piece& piece, std::string_view digest);

/// Rewrites every index chunk so that it describes the pieces where they now lie: the segment
/// starts at the last key chunk before it, holds the samples of the packed chunks since, and
/// points back at the index chunk before. Digests and timestamps are kept. After chunks were
/// moved, copied or dropped, this turns the file into a consistent forgery instead of one whose
/// index the reader rejects at once.
void reindex(std::vector<Piece>& pieces);

/// Mutates `pieces` in one of the structured ways (see recording_pieces.cpp); `mutate_bytes` is
/// libFuzzer's byte mutator (LLVMFuzzerMutate), used on the contents of one field. Returns
/// false when no structured mutation applied (the caller then mutates the bytes).
using ByteMutator = std::size_t (*)(uint8_t* data, std::size_t size, std::size_t max_size);
bool mutate_structure(std::vector<Piece>& pieces, std::mt19937_64& random,
                      ByteMutator mutate_bytes);

}  // namespace vramscope::fuzz
