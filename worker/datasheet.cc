#include "worker/datasheet.h"

#include <cctype>
#include <cstdio>
#include <string_view>

namespace ak {

// PCI ids: pci.ids (github.com/pciutils/pciids, version 2026.08.22), cross-checked for the data
// centre parts against the device filters in NVIDIA's mig-parted configs
// (github.com/NVIDIA/mig-parted, deployments/systemd/config-default.yaml).
// Tensor rates: the Hopper, L4 and Blackwell datasheets print only the "with sparsity" figure
// (their asterisk/footnote); it is halved here. The A100 and L40S datasheets and the GeForce
// whitepapers print dense/sparse pairs; the dense one is taken as printed.
const std::vector<DatasheetEntry>& datasheet_table() {
  static const std::vector<DatasheetEntry> table = {
      {.name = "NVIDIA H100 SXM5 80GB",
       .pci_device_ids = {"10de:2330"},
       .name_patterns = {"h100 80gb hbm3", "h100"},
       .memory_gb = 80,
       .memory_bandwidth_gbps = 3350,
       .fp16_tflops = 989.5,  // printed 1,979 with sparsity
       .bf16_tflops = 989.5,
       .tf32_tflops = 494.5,  // printed 989 with sparsity
       .fp32_tflops = 67,
       .source = "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column "
                 "(nvidia.com/en-us/data-center/h100)"},
      // The current H100 datasheet lists SXM and NVL only; the PCIe card is in its 2022 edition
      // (SXM | PCIe columns) and in product brief PB-11133-001 ("greater than 2,000 GB/s").
      {.name = "NVIDIA H100 PCIe 80GB",
       .pci_device_ids = {"10de:2331"},
       .name_patterns = {"h100 pcie", "h100"},
       .memory_gb = 80,
       .memory_bandwidth_gbps = 2000,
       .fp16_tflops = 756.5,  // printed 1,513 with sparsity
       .bf16_tflops = 756.5,
       .tf32_tflops = 378,  // printed 756 with sparsity
       .fp32_tflops = 51,
       .source = "NVIDIA H100 Tensor Core GPU datasheet (2022 edition), H100 PCIe column; "
                 "NVIDIA H100 PCIe product brief PB-11133-001"},
      // Per GPU. The first (2023) H100 NVL datasheet described the bridged pair (188GB, 7.8TB/s,
      // twice these rates); the current one lists one card. pci.ids calls 2321 "H100L 94GB",
      // NVIDIA's mig-parted calls 0x2321 "H100 NVL".
      {.name = "NVIDIA H100 NVL 94GB",
       .pci_device_ids = {"10de:2321"},
       .name_patterns = {"h100 nvl", "h100"},
       .memory_gb = 94,
       .memory_bandwidth_gbps = 3900,
       .fp16_tflops = 835.5,  // printed 1,671 with sparsity
       .bf16_tflops = 835.5,
       .tf32_tflops = 417.5,  // printed 835 with sparsity
       .fp32_tflops = 60,
       .source = "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column "
                 "(nvidia.com/en-us/data-center/h100)"},
      // Reports plain "NVIDIA H200"; the NVL card reports "NVIDIA H200 NVL", so "h200" is not a
      // family pattern shared by both.
      {.name = "NVIDIA H200 SXM 141GB",
       .pci_device_ids = {"10de:2335"},
       .name_patterns = {"h200"},
       .memory_gb = 141,
       .memory_bandwidth_gbps = 4800,
       .fp16_tflops = 989.5,  // printed 1,979 with sparsity
       .bf16_tflops = 989.5,
       .tf32_tflops = 494.5,  // printed 989 with sparsity
       .fp32_tflops = 67,
       .source = "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column "
                 "(nvidia.com/en-us/data-center/h200)"},
      {.name = "NVIDIA H200 NVL 141GB",
       .pci_device_ids = {"10de:233b"},
       .name_patterns = {"h200 nvl"},
       .memory_gb = 141,
       .memory_bandwidth_gbps = 4800,
       .fp16_tflops = 835.5,  // printed 1,671 with sparsity
       .bf16_tflops = 835.5,
       .tf32_tflops = 417.5,  // printed 835 with sparsity
       .fp32_tflops = 60,
       .source = "NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column "
                 "(nvidia.com/en-us/data-center/h200)"},
      // The A100 rates are the same on all four boards; only memory and bandwidth differ. The
      // current datasheet (r4) has the two 80GB columns; the 40GB bandwidth is from the 2020
      // four-column edition and the GA100 whitepaper (A100 SXM4 40GB: 1555 GB/sec).
      {.name = "NVIDIA A100 SXM4 40GB",
       .pci_device_ids = {"10de:20b0"},
       .name_patterns = {"a100-sxm4-40gb", "a100"},
       .memory_gb = 40,
       .memory_bandwidth_gbps = 1555,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .tf32_tflops = 156,
       .fp32_tflops = 19.5,
       .source = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (GA100), A100 SXM4 40GB; "
                 "NVIDIA A100 datasheet (2020 edition)"},
      {.name = "NVIDIA A100 SXM4 80GB",
       .pci_device_ids = {"10de:20b2"},
       .name_patterns = {"a100-sxm4-80gb", "a100"},
       .memory_gb = 80,
       .memory_bandwidth_gbps = 2039,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .tf32_tflops = 156,
       .fp32_tflops = 19.5,
       .source = "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column "
                 "(nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"},
      // Two device ids: pci.ids lists both 20b1 and 20f1 as "A100 PCIe 40GB"; NVIDIA's mig-parted
      // groups both under A100-40GB.
      {.name = "NVIDIA A100 PCIe 40GB",
       .pci_device_ids = {"10de:20b1", "10de:20f1"},
       .name_patterns = {"a100-pcie-40gb", "a100"},
       .memory_gb = 40,
       .memory_bandwidth_gbps = 1555,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .tf32_tflops = 156,
       .fp32_tflops = 19.5,
       .source = "NVIDIA A100 datasheet (2020 edition), A100 40GB PCIe column"},
      {.name = "NVIDIA A100 PCIe 80GB",
       .pci_device_ids = {"10de:20b5"},
       .name_patterns = {"a100 80gb pcie", "a100"},
       .memory_gb = 80,
       .memory_bandwidth_gbps = 1935,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .tf32_tflops = 156,
       .fp32_tflops = 19.5,
       .source = "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB PCIe column "
                 "(nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"},
      {.name = "NVIDIA L40S",
       .pci_device_ids = {"10de:26b9"},
       .name_patterns = {"l40s"},
       .memory_gb = 48,
       .memory_bandwidth_gbps = 864,
       .fp16_tflops = 362.05,  // printed 733 with sparsity, 362.05 dense
       .bf16_tflops = 362.05,
       .tf32_tflops = 183,  // printed 366 with sparsity
       .fp32_tflops = 91.6,
       .source = "NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s)"},
      {.name = "NVIDIA L4",
       .pci_device_ids = {"10de:27b8"},
       .name_patterns = {"l4"},
       .memory_gb = 24,
       .memory_bandwidth_gbps = 300,
       .fp16_tflops = 121,  // printed 242 with sparsity
       .bf16_tflops = 121,
       .tf32_tflops = 60,  // printed 120 with sparsity
       .fp32_tflops = 30.3,
       .source = "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4)"},
      // GeForce runs FP16 with FP32 accumulate at half the FP16-accumulate rate (330.3 dense);
      // the FP32-accumulate figure is the one a training GEMM meets.
      {.name = "NVIDIA GeForce RTX 4090",
       .pci_device_ids = {"10de:2684"},
       .name_patterns = {"geforce rtx 4090", "rtx 4090"},
       .memory_gb = 24,
       .memory_bandwidth_gbps = 1008,
       .fp16_tflops = 165.2,
       .bf16_tflops = 165.2,
       .tf32_tflops = 82.6,
       .fp32_tflops = 82.6,
       .source = "NVIDIA Ada GPU Architecture whitepaper v2.02, Appendix A Table 2 "
                 "(images.nvidia.com/aem-dam/Solutions/geforce/ada/"
                 "nvidia-ada-gpu-architecture.pdf)"},
      // As for the 4090: FP16 with FP16 accumulate is 142 dense; FP32 accumulate is 71.
      {.name = "NVIDIA GeForce RTX 3090",
       .pci_device_ids = {"10de:2204"},
       .name_patterns = {"geforce rtx 3090", "rtx 3090"},
       .memory_gb = 24,
       .memory_bandwidth_gbps = 936,
       .fp16_tflops = 71,
       .bf16_tflops = 71,
       .tf32_tflops = 35.6,
       .fp32_tflops = 35.6,
       .source = "NVIDIA Ampere GA102 GPU Architecture whitepaper v2, Appendix A Table 9 "
                 "(GeForce RTX 3090)"},
      // Least certain entry. NVIDIA's current HGX B200 table gives per GPU 180GB, 7.7TB/s,
      // FP16/BF16 4.5 PF and TF32 2.2 PF (both with sparsity), FP32 75 TF at up to 1,000 W; the
      // launch material and the DGX B200 datasheet said 192GB / 8TB/s (64TB/s per 8 GPUs). We
      // take the current table. TF32 "2.2" is likely 2.25 rounded. pci.ids also lists 10de:2909
      // "HGX B200 168GB", left out: a different memory size, and nothing published for it.
      {.name = "NVIDIA B200",
       .pci_device_ids = {"10de:2901"},
       .name_patterns = {"b200"},
       .memory_gb = 180,
       .memory_bandwidth_gbps = 7700,
       .fp16_tflops = 2250,  // printed 4.5 PFLOPS with sparsity
       .bf16_tflops = 2250,
       .tf32_tflops = 1100,  // printed 2.2 PFLOPS with sparsity
       .fp32_tflops = 75,
       .source = "NVIDIA HGX B200 specifications, per-GPU figures "
                 "(nvidia.com/en-us/data-center/hgx)"},
  };
  return table;
}

namespace {

// Memory sizes that settle a name tie must lie within this fraction of the datasheet size.
// Boards report a little less than printed (80GB -> 79.6 GiB; an ECC-enabled 48GB L40S ->
// 45 GiB); neighbouring products differ by far more (80 vs 94, 40 vs 80).
constexpr double kMemoryTolerance = 0.10;

std::string lower_trimmed(std::string_view s) {
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The name ends with the pattern, and the pattern starts the name or follows a non-alphanumeric.
bool name_ends_with_word(const std::string& name, const std::string& pattern) {
  if (pattern.empty() || !name.ends_with(pattern)) return false;
  const size_t start = name.size() - pattern.size();
  return start == 0 || !std::isalnum(static_cast<unsigned char>(name[start - 1]));
}

std::string gib_text(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

std::string names_text(const std::vector<const DatasheetEntry*>& entries) {
  std::string out;
  for (const DatasheetEntry* e : entries) {
    if (!out.empty()) out += ", ";
    out += e->name;
  }
  return out;
}

bool memory_fits(const DatasheetEntry& e, int64_t memory_bytes) {
  const double gib = static_cast<double>(memory_bytes) / (1ull << 30);
  return gib >= e.memory_gb * (1 - kMemoryTolerance) && gib <= e.memory_gb * (1 + kMemoryTolerance);
}

// The longest of the entry's patterns that the (lower-case) name ends with; empty if none.
std::string longest_matching_pattern(const DatasheetEntry& e, const std::string& name) {
  std::string longest;
  for (const std::string& p : e.name_patterns) {
    if (p.size() > longest.size() && name_ends_with_word(name, p)) longest = p;
  }
  return longest;
}

// The entries whose longest matching pattern is the longest in the table, and that pattern.
struct NameMatches {
  std::vector<const DatasheetEntry*> entries;
  std::string pattern;
};

NameMatches match_by_name(const std::vector<DatasheetEntry>& table, const std::string& name) {
  NameMatches best;
  for (const DatasheetEntry& e : table) {
    const std::string pattern = longest_matching_pattern(e, name);
    if (pattern.empty() || pattern.size() < best.pattern.size()) continue;
    if (pattern.size() > best.pattern.size()) best = {{}, pattern};
    best.entries.push_back(&e);
  }
  return best;
}

}  // namespace

DatasheetMatch match_datasheet(const std::string& pci_device_id, const std::string& gpu_name,
                               int64_t memory_bytes) {
  const std::vector<DatasheetEntry>& table = datasheet_table();
  const std::string id = lower_trimmed(pci_device_id);
  const std::string name = lower_trimmed(gpu_name);
  const std::string no_entry = "no datasheet entry for pci id " + (id.empty() ? "(unknown)" : id) +
                               ", name '" + gpu_name + "'; ceilings are measured only";

  if (!id.empty()) {
    for (const DatasheetEntry& e : table) {
      for (const std::string& known : e.pci_device_ids) {
        if (known == id) return {&e, "pci device id " + id};
      }
    }
  }
  if (name.empty()) return {nullptr, no_entry};

  const NameMatches by_name = match_by_name(table, name);
  if (by_name.entries.empty()) return {nullptr, no_entry};
  std::string how = "name '" + gpu_name + "' ~ '" + by_name.pattern + "'";
  if (!id.empty()) how += " (pci id " + id + " is not in the table)";
  if (by_name.entries.size() == 1) return {by_name.entries.front(), how};

  // A family pattern shared by several products: let the memory size decide, or pick nothing.
  how += " is ambiguous: " + names_text(by_name.entries);
  if (memory_bytes <= 0) {
    return {nullptr, how + "; memory size unknown; ceilings are measured only"};
  }
  std::vector<const DatasheetEntry*> by_memory;
  for (const DatasheetEntry* e : by_name.entries) {
    if (memory_fits(*e, memory_bytes)) by_memory.push_back(e);
  }
  how += "; memory " + gib_text(memory_bytes);
  if (by_memory.size() == 1) return {by_memory.front(), how + " picks " + by_memory.front()->name};
  if (by_memory.empty()) return {nullptr, how + " fits none of them; ceilings are measured only"};
  return {nullptr, how + " still fits " + names_text(by_memory) + "; ceilings are measured only"};
}

}  // namespace ak
