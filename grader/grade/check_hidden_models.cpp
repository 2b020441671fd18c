// Hidden models: network checks on staff models the students never saw (other layer shapes);
// a student reads the outcome, never the model's name or the run's output.
#include "grader/grade/grading.hpp"

namespace convlab::grader {

namespace {

class HiddenModelCheck final : public CheckKind {
 public:
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override {
    run_counted_network(
        g, p, c,
        "A hidden model runs layers of other shapes than the public models (other filter "
        "counts, more input channels, other filter and image sizes). Make your code correct "
        "for any ConvShape: run `" +
            g.run_command(p, 10000) +
            "` (two conv layers, C > 1) and read the element-wise check.");
  }
};

}  // namespace

const CheckKind& hidden_model_check() {
  static const HiddenModelCheck kind;
  return kind;
}

}  // namespace convlab::grader
