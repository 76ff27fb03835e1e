// Datasheet ceilings: what NVIDIA publishes for a GPU product, looked up from what the driver says.
//
// The worker measures its own ceilings (bandwidth, tensor throughput); this table holds the
// vendor's figures next to them, so a report can say "2.9 TB/s measured of 3.35 TB/s published".
// It is plain data in worker/datasheet.cc, one entry per product with one source line each, and
// needs neither the driver nor libtorch. Every figure is the dense one: NVIDIA prints tensor-core
// rates "with sparsity" (2:4), twice the dense rate; the table stores half of those.
//
// Matching rule (match_datasheet):
//   1. PCI device id. If pci_device_id ("10de:2335", any case, surrounding blanks ignored) is one
//      of an entry's pci_device_ids, that entry wins, whatever the name says. The id names the
//      board exactly; the name is only a hint.
//   2. Name. Otherwise gpu_name (cuDeviceGetName, any case, surrounding blanks ignored) is tried
//      against every entry's name_patterns. A pattern matches when the name ends with it and it
//      starts at a word boundary (the name's start, or after a character that is not a letter or
//      digit). The anchoring is deliberate: a plain substring test would read "NVIDIA GeForce
//      RTX 3090 Ti" as an RTX 3090, "NVIDIA GeForce RTX 4090 D" as an RTX 4090, "NVIDIA GH200
//      480GB" as an H200 and "NVIDIA L40" as an L4, all different products. MIG instances
//      ("NVIDIA A100-SXM4-40GB MIG 1g.5gb") match no name either; a datasheet describes the whole
//      GPU. (They still match by PCI id, which is the parent GPU's; callers that run on a MIG
//      slice must not compare against these figures.)
//      The longest matching pattern wins. Ties between entries happen only on a family pattern
//      that several entries share (plain "NVIDIA H100" matches "h100" of the H100 SXM5, PCIe and
//      NVL entries). A tie is settled by memory size: of the tied entries, those whose memory_gb
//      is within 10 % of memory_bytes (read as GiB, which is how NVIDIA's "80GB" boards report:
//      79.6 GiB) remain; if exactly one remains it wins. If memory_bytes is 0 (unknown), or no
//      entry or more than one remains (an 80 GiB "NVIDIA H100" may be the SXM5 or the PCIe card),
//      nothing is picked and `how` names the candidates: a wrong ceiling is worse than none.
//   3. Nothing matched: entry is nullptr and `how` says "no datasheet entry for pci id ...,
//      name '...'; ceilings are measured only".
//
// All functions are pure and thread-safe; the table is immutable static data that lives for the
// whole process, so DatasheetMatch::entry never dangles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ak {

struct DatasheetEntry {
  std::string name;                         // marketing name, e.g. "NVIDIA H200 SXM 141GB"
  std::vector<std::string> pci_device_ids;  // lower-case "10de:2335" (vendor:device), all known
                                            // ids of that product
  std::vector<std::string> name_patterns;   // lower-case name endings matched against
                                            // cuDeviceGetName output, most specific first
  double memory_gb;                         // datasheet memory capacity [GB as printed; the
                                            // driver reports about that many GiB]
  double memory_bandwidth_gbps;             // datasheet DRAM bandwidth [GB/s]
  double fp16_tflops;  // dense tensor-core FP16 with FP32 accumulate [TFLOP/s] (not the sparse
                       // figure)
  double bf16_tflops;  // dense tensor-core BF16 [TFLOP/s]
  double tf32_tflops;  // dense tensor-core TF32 [TFLOP/s]
  double fp32_tflops;  // non-tensor FP32 (CUDA cores) [TFLOP/s]
  std::string source;  // where the numbers come from (datasheet title / URL)
};

struct DatasheetMatch {
  const DatasheetEntry* entry = nullptr;  // nullptr: no match; else points into datasheet_table()
  std::string how;  // how the entry was found, or why none was: "pci device id 10de:2335" /
                    // "name 'NVIDIA H200' ~ 'h200'" / "no datasheet entry for pci id 10de:xxxx,
                    // name '...'; ceilings are measured only"
};

// Finds the datasheet entry for one GPU by the rule in the header comment. pci_device_id and
// gpu_name may each be empty (unknown); memory_bytes is cuDeviceTotalMem, 0 if unknown, and only
// settles ties between name matches. Never fails: "no entry" is a normal answer.
DatasheetMatch match_datasheet(const std::string& pci_device_id, const std::string& gpu_name,
                               int64_t memory_bytes = 0);

// Every known product, in a fixed order. PCI ids are unique across the table.
const std::vector<DatasheetEntry>& datasheet_table();

}  // namespace ak
