// The results table and its order (cli/format.h): shapes by their numbers, best first, --limit.
#include "cli/format.h"

#include <gtest/gtest.h>

namespace ak::cli {
namespace {

protocol::ResultRow row(const std::string& shape, double speedup, const std::string& config) {
  protocol::ResultRow r;
  r.campaign_id = "c";
  r.kernel_type = "softmax";
  r.shape = shape;
  r.dtype = "fp32";
  r.correctness = "PASS";
  r.speedup_vs_pytorch = speedup;
  r.config = config;
  r.job_id = "c-" + shape + "-" + config;
  return r;
}

TEST(FormatResults, OrdersShapesByTheirNumbersBestFirstAndHonoursTheLimit) {
  const std::vector<protocol::ResultRow> rows = {row("1024x64", 1.0, "A"), row("128x64", 0.5, "B"),
                                                 row("128x64", 2.0, "C"), row("64x64", 1.0, "D")};
  const auto all = ordered_results(rows, 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].config, "D");  // 64 < 128 < 1024, which text order would not give
  EXPECT_EQ(all[1].config, "C");  // the better of the two 128x64 rows first
  EXPECT_EQ(all[2].config, "B");
  EXPECT_EQ(all[3].config, "A");
  EXPECT_EQ(ordered_results(rows, 2).size(), 2u);
}

TEST(FormatResults, NoConfigIsCutAndTheKernelIsNamed) {
  const std::string config = "AK_ONLINE=0,AK_ROWS_PER_TILE=1,AK_VEC=8,AK_THREADS=256";
  const std::string table = format_results({row("64x64", 1.0, config)}, 0);
  EXPECT_NE(table.find(config), std::string::npos) << table;
  EXPECT_NE(table.find("softmax"), std::string::npos) << table;
  EXPECT_NE(table.find("kernel"), std::string::npos) << table;
}

}  // namespace
}  // namespace ak::cli
