#include "worker/datasheet.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ak {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// The entry's name, or "(none)" so a failed match prints readably.
std::string picked(const DatasheetMatch& m) { return m.entry ? m.entry->name : "(none)"; }

bool is_lower(const std::string& s) {
  for (unsigned char c : s) {
    if (std::isupper(c)) return false;
  }
  return true;
}

TEST(MatchDatasheet, PciIdWinsOverAConflictingName) {
  const DatasheetMatch m = match_datasheet("10de:2335", "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(picked(m), "NVIDIA H200 SXM 141GB");
  EXPECT_EQ(m.how, "pci device id 10de:2335");
}

TEST(MatchDatasheet, TheTestMachinesH200IsTheSxmBoard) {
  const DatasheetMatch m = match_datasheet("10de:2335", "NVIDIA H200", 143771 * kMiB);
  EXPECT_EQ(picked(m), "NVIDIA H200 SXM 141GB") << m.how;
}

TEST(MatchDatasheet, EveryKnownDriverNameMatchesItsProductWithoutAPciId) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"NVIDIA H200", "NVIDIA H200 SXM 141GB"},
      {"NVIDIA H200 NVL", "NVIDIA H200 NVL 141GB"},
      {"NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"},
      {"NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB"},
      {"NVIDIA H100 NVL", "NVIDIA H100 NVL 94GB"},
      {"NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"},
      {"NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB"},
      {"NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB"},
      {"NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB"},
      {"NVIDIA L40S", "NVIDIA L40S"},
      {"NVIDIA L4", "NVIDIA L4"},
      {"NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"},
      {"NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"},
      {"NVIDIA B200", "NVIDIA B200"},
  };
  for (const auto& [driver_name, product] : cases) {
    const DatasheetMatch m = match_datasheet("", driver_name);
    EXPECT_EQ(picked(m), product) << driver_name << ": " << m.how;
    EXPECT_EQ(m.how.rfind("name '" + driver_name + "' ~ '", 0), 0u) << m.how;
  }
}

TEST(MatchDatasheet, NameMatchReportsThePatternUsed) {
  EXPECT_EQ(match_datasheet("", "NVIDIA H200").how, "name 'NVIDIA H200' ~ 'h200'");
}

TEST(MatchDatasheet, NameMatchSaysThePciIdWasNotKnown) {
  const DatasheetMatch m = match_datasheet("10de:abcd", "NVIDIA H200");
  EXPECT_EQ(picked(m), "NVIDIA H200 SXM 141GB");
  EXPECT_NE(m.how.find("10de:abcd is not in the table"), std::string::npos) << m.how;
}

TEST(MatchDatasheet, UnknownIdAndUnknownNameMatchNothingAndSaySo) {
  const DatasheetMatch m = match_datasheet("10de:ffff", "Acme Tensor Brick 9000", 16 * 1024 * kMiB);
  EXPECT_EQ(m.entry, nullptr);
  EXPECT_EQ(m.how,
            "no datasheet entry for pci id 10de:ffff, name 'Acme Tensor Brick 9000'; "
            "ceilings are measured only");
}

TEST(MatchDatasheet, NothingKnownAtAllSaysSo) {
  const DatasheetMatch m = match_datasheet("", "");
  EXPECT_EQ(m.entry, nullptr);
  EXPECT_EQ(m.how, "no datasheet entry for pci id (unknown), name ''; ceilings are measured only");
}

TEST(MatchDatasheet, IdAndNameAreCaseInsensitive) {
  EXPECT_EQ(picked(match_datasheet("10DE:233B", "")), "NVIDIA H200 NVL 141GB");
  EXPECT_EQ(picked(match_datasheet("", "nvidia h200 nvl")), "NVIDIA H200 NVL 141GB");
  EXPECT_EQ(picked(match_datasheet("", "NVIDIA GEFORCE RTX 4090")), "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(picked(match_datasheet("", "nvidia a100-pcie-40gb")), "NVIDIA A100 PCIe 40GB");
}

TEST(MatchDatasheet, SurroundingBlanksAreIgnored) {
  EXPECT_EQ(picked(match_datasheet(" 10de:2330\n", "")), "NVIDIA H100 SXM5 80GB");
  EXPECT_EQ(picked(match_datasheet("", "NVIDIA L4  ")), "NVIDIA L4");
}

// Neighbouring products whose names contain a table entry's name; each has other figures.
TEST(MatchDatasheet, NamesThatOnlyContainAKnownNameMatchNothing) {
  for (const std::string name :
       {"NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 4090 D", "NVIDIA GH200 480GB",
        "NVIDIA GB200", "NVIDIA L40", "NVIDIA H20", "NVIDIA A100-SXM4-40GB MIG 1g.5gb"}) {
    const DatasheetMatch m = match_datasheet("", name);
    EXPECT_EQ(m.entry, nullptr) << name << " matched " << picked(m);
    EXPECT_NE(m.how.find("ceilings are measured only"), std::string::npos) << m.how;
  }
}

TEST(MatchDatasheet, PlainH100WithoutMemorySizeIsAmbiguousAndPicksNothing) {
  const DatasheetMatch m = match_datasheet("", "NVIDIA H100");
  EXPECT_EQ(m.entry, nullptr);
  EXPECT_NE(m.how.find("ambiguous"), std::string::npos) << m.how;
  EXPECT_NE(m.how.find("NVIDIA H100 SXM5 80GB"), std::string::npos) << m.how;
  EXPECT_NE(m.how.find("NVIDIA H100 PCIe 80GB"), std::string::npos) << m.how;
  EXPECT_NE(m.how.find("NVIDIA H100 NVL 94GB"), std::string::npos) << m.how;
  EXPECT_NE(m.how.find("measured only"), std::string::npos) << m.how;
}

TEST(MatchDatasheet, PlainH100With94GBIsTheNvl) {
  // An H100 NVL reports 95830 MiB.
  const DatasheetMatch m = match_datasheet("", "NVIDIA H100", 95830 * kMiB);
  EXPECT_EQ(picked(m), "NVIDIA H100 NVL 94GB") << m.how;
  EXPECT_NE(m.how.find("93.6 GiB picks NVIDIA H100 NVL 94GB"), std::string::npos) << m.how;
}

TEST(MatchDatasheet, PlainH100With80GBStaysAmbiguousBetweenSxmAndPcie) {
  // Both 80GB boards report 81559 MiB; the memory size cannot tell them apart.
  const DatasheetMatch m = match_datasheet("", "NVIDIA H100", 81559 * kMiB);
  EXPECT_EQ(m.entry, nullptr);
  EXPECT_NE(m.how.find("still fits NVIDIA H100 SXM5 80GB, NVIDIA H100 PCIe 80GB"),
            std::string::npos)
      << m.how;
}

TEST(MatchDatasheet, PlainH100WithAnUnlistedMemorySizePicksNothing) {
  const DatasheetMatch m = match_datasheet("", "NVIDIA H100", 64 * 1024 * kMiB);
  EXPECT_EQ(m.entry, nullptr);
  EXPECT_NE(m.how.find("fits none of them"), std::string::npos) << m.how;
}

TEST(MatchDatasheet, MemorySizeDoesNotOverrideAUniqueNameOrAPciId) {
  // Only ties consult the memory size.
  EXPECT_EQ(picked(match_datasheet("", "NVIDIA H100 PCIe", 40 * 1024 * kMiB)),
            "NVIDIA H100 PCIe 80GB");
  EXPECT_EQ(picked(match_datasheet("10de:20b0", "", 80 * 1024 * kMiB)), "NVIDIA A100 SXM4 40GB");
}

TEST(MatchDatasheet, EntryPointsIntoTheTable) {
  const DatasheetMatch m = match_datasheet("10de:2684", "");
  const std::vector<DatasheetEntry>& table = datasheet_table();
  ASSERT_NE(m.entry, nullptr);
  EXPECT_GE(m.entry, table.data());
  EXPECT_LT(m.entry, table.data() + table.size());
}

TEST(DatasheetTable, HoldsEveryRequiredProduct) {
  std::set<std::string> names;
  for (const DatasheetEntry& e : datasheet_table()) names.insert(e.name);
  for (const char* required :
       {"NVIDIA H100 SXM5 80GB", "NVIDIA H100 PCIe 80GB", "NVIDIA H100 NVL 94GB",
        "NVIDIA H200 SXM 141GB", "NVIDIA H200 NVL 141GB", "NVIDIA A100 SXM4 40GB",
        "NVIDIA A100 SXM4 80GB", "NVIDIA A100 PCIe 40GB", "NVIDIA A100 PCIe 80GB", "NVIDIA L40S",
        "NVIDIA L4", "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090", "NVIDIA B200"}) {
    EXPECT_EQ(names.count(required), 1u) << required;
  }
}

TEST(DatasheetTable, EveryEntryHasPositiveNumbersAndASource) {
  for (const DatasheetEntry& e : datasheet_table()) {
    EXPECT_GT(e.memory_gb, 0) << e.name;
    EXPECT_GT(e.memory_bandwidth_gbps, 0) << e.name;
    EXPECT_GT(e.fp16_tflops, 0) << e.name;
    EXPECT_GT(e.bf16_tflops, 0) << e.name;
    EXPECT_GT(e.tf32_tflops, 0) << e.name;
    EXPECT_GT(e.fp32_tflops, 0) << e.name;
    EXPECT_FALSE(e.source.empty()) << e.name;
    EXPECT_FALSE(e.pci_device_ids.empty()) << e.name;
    EXPECT_FALSE(e.name_patterns.empty()) << e.name;
  }
}

// A sparse figure next to a dense one would break these ratios (dense FP16 is twice dense TF32
// on every listed product; tensor TF32 is never below CUDA-core FP32).
TEST(DatasheetTable, TensorFiguresAreConsistentlyDense) {
  for (const DatasheetEntry& e : datasheet_table()) {
    EXPECT_GE(e.fp16_tflops / e.tf32_tflops, 1.9) << e.name;
    EXPECT_LE(e.fp16_tflops / e.tf32_tflops, 2.1) << e.name;
    EXPECT_GE(e.tf32_tflops, e.fp32_tflops) << e.name;
  }
}

TEST(DatasheetTable, PciIdsAreUniqueLowerCaseVendorDevicePairs) {
  std::map<std::string, std::string> owner;
  for (const DatasheetEntry& e : datasheet_table()) {
    for (const std::string& id : e.pci_device_ids) {
      EXPECT_EQ(id.size(), 9u) << e.name << ": " << id;
      EXPECT_EQ(id.rfind("10de:", 0), 0u) << e.name << ": " << id;
      EXPECT_TRUE(is_lower(id)) << e.name << ": " << id;
      const auto [it, inserted] = owner.emplace(id, e.name);
      EXPECT_TRUE(inserted) << id << " is listed by both " << it->second << " and " << e.name;
    }
  }
}

TEST(DatasheetTable, NamePatternsAreLowerCase) {
  for (const DatasheetEntry& e : datasheet_table()) {
    for (const std::string& p : e.name_patterns) EXPECT_TRUE(is_lower(p)) << e.name << ": " << p;
  }
}

}  // namespace
}  // namespace ak
