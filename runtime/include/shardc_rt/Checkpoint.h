//===- Checkpoint.h - Sharded checkpoints that reshard on load --*- C++ -*-===//
//
// A checkpoint is a directory:
//
//   dir/rank-<r>.<id>.safetensors
//                              one per saving rank: the element ranges that
//                              rank wrote, each an F32 tensor of shape
//                              [end - begin] named "<tensor>@<begin>:<end>";
//                              __metadata__ holds format, id, rank, world
//   dir/checkpoint.json        written last, by rank 0:
//     {"format": "shardc-checkpoint", "version": 2, "id": "<hex>",
//      "world": W, "metadata": {"step": "3", ...},
//      "tensors": {"<tensor>": {"dtype": "F32", "shape": [8, 8]}, ...},
//      "files": [{"name": "rank-0.<id>.safetensors", "rank": 0, "bytes": B,
//                 "pieces": [["<tensor>", begin, end, "<crc32>"], ...]},
//                ...],
//      "crc32": "<crc32>"}
//
// Each piece's CRC-32 (zlib's, of its stored floats, 8 hex digits) is
// checked when a load first reads it: a flipped bit in a rank file is an
// error naming the file and the piece, not a silently different model.
// Version 1 (no checksums) still loads. checkpoint.json's last member is
// the CRC-32 of its own bytes before the comma ahead of it, checked as it
// is read: a digit changed in its step or a range is an error, not a run
// resumed at another step. A checkpoint.json edited on purpose loads
// without that member, as those written before it do.
//
// Ranges rather than strategy-specific shards are what make resharding work:
// whatever the saving world and layout, a loading rank asks for the ranges
// it holds and gets them from whichever files overlap them, opening only
// those. checkpoint.json appears only once every rank file is complete, so a
// directory without it is not a checkpoint; the id ties the rank files to
// the checkpoint.json that lists them. A save into a directory holding a
// checkpoint writes its rank files beside the old ones (the id is in their
// names) and replaces checkpoint.json in one rename: until then the old
// checkpoint loads as it was, and a save that fails (a full disk) leaves it
// so; its rank files are removed after. A save thus needs room for both
// checkpoints, and one save at a time writes to a directory.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CHECKPOINT_H
#define SHARDC_RT_CHECKPOINT_H

// The MPI-2 C++ bindings are deprecated, unused here, and trip
// -Wcast-function-type in OpenMPI's headers.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardc::rt {

/// A contiguous element range [begin, end) of a flattened full fp32 tensor
/// that this rank holds: a parameter's shard, its Adam exp_avg or exp_avg_sq,
/// or its fp32 master copy.
struct Piece {
  /// The full tensor's name, e.g. "layers.0.weight" or
  /// "layers.0.weight.exp_avg".
  std::string tensor;
  std::vector<int64_t> fullShape;
  int64_t begin = 0, end = 0;
  /// end - begin floats: read by save, filled by load.
  float *data = nullptr;
  /// Save only: false where another rank writes the same range (replicas),
  /// so that each range is stored once.
  bool write = true;
};

/// Whether a file named `name` in a checkpoint directory belongs to the
/// checkpoint: checkpoint.json or a rank file.
bool isCheckpointFileName(const std::string &name);

/// Removes the checkpoint in `dir`: its checkpoint.json first (so that
/// what is left never loads as a checkpoint), then its rank files (and
/// temporary ones of a save killed before its commit), then
/// `dir` where that leaves it empty. Rank-local. Returns "", or what stays
/// and why (a file that is not the checkpoint's is never removed).
std::string tryRemoveCheckpoint(const std::string &dir);

/// Before training: why saveCheckpoint could not create or write `dir`, ""
/// where it can. Leaves nothing behind.
std::string tryCheckCheckpointDir(const std::string &dir);

/// Saves every piece with write = true. Collective over `world`: each rank
/// writes dir/rank-<r>.<id>.safetensors (temporary file + rename), all ranks
/// agree that every write succeeded, then rank 0 checks that the written
/// ranges cover every tensor and writes dir/checkpoint.json the same way,
/// replacing a previous checkpoint in that one rename, and removes the
/// previous checkpoint's rank files. `dir` is created if missing (mkdir -p)
/// and must be one directory all ranks see. Any failure on any rank fails
/// every rank, none is left waiting, and what the save wrote is removed: a
/// checkpoint that was in `dir` still loads. `metadata` (step, strategy,
/// world, layout, model, ...) is stored in checkpoint.json.
void saveCheckpoint(const std::string &dir, MPI_Comm world,
                    const std::vector<Piece> &pieces,
                    const std::map<std::string, std::string> &metadata);

/// Fills every piece's data[0, end - begin) from the checkpoint in `dir`,
/// whatever world size and layout saved it, and returns its metadata.
/// Collective over `world` only so that a failure on any rank fails all
/// ranks; the reading itself is rank-local.
std::map<std::string, std::string>
loadCheckpoint(const std::string &dir, MPI_Comm world,
               const std::vector<Piece> &pieces);

/// checkpoint.json as parsed: where every stored range is (Checkpoint.cpp).
struct CheckpointManifest;

/// One save's checkpoint.json, read once: what it says, and where its
/// pieces are, from which tryLoadCheckpoint loads that save and no other.
struct CheckpointHeader {
  std::string dir;
  /// The save's, in every rank file's name.
  std::string id;
  std::map<std::string, std::string> metadata;
  /// Every tensor's name, sorted.
  std::vector<std::string> tensors;
  std::shared_ptr<const CheckpointManifest> manifest;
};

/// Reads and checks only dir/checkpoint.json, no rank file: returns "" and
/// sets `header`, or says what is wrong. For checks that should come before
/// any tensor is read (which model saved it, whether it holds tensors the
/// model lacks, whether every rank reads the same save).
std::string tryReadCheckpointHeader(const std::string &dir,
                                    CheckpointHeader &header);

/// The rank-local core of loadCheckpoint, which does not fail the process:
/// fills every piece from the save `header` read and returns "", or says
/// what is wrong (a tensor missing or of another shape, a range no file
/// covers, a rank file missing, truncated, corrupt or from another save).
/// checkpoint.json is not read again, so a save committed into the
/// directory since is never mixed in: its rank files carry another id, and
/// the replaced save's files are refused once removed.
std::string tryLoadCheckpoint(const CheckpointHeader &header,
                              const std::vector<Piece> &pieces);

/// tryReadCheckpointHeader, then tryLoadCheckpoint of what it read; sets
/// `metadata` on success.
std::string tryLoadCheckpoint(const std::string &dir,
                              const std::vector<Piece> &pieces,
                              std::map<std::string, std::string> &metadata);

} // namespace shardc::rt

#endif // SHARDC_RT_CHECKPOINT_H
