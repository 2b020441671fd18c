// convlab-train: trains one of the project's networks on Fashion-MNIST and writes model files.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "reference/core/error.hpp"
#include "reference/core/parallel.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/model/model.hpp"
#include "tools/train/sha256.hpp"
#include "tools/train/trainer.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json data_record(const convlab::data::Dataset& d) {
  convlab::tools::Sha256 pixels;
  pixels.update(d.pixels);
  return {{"count", d.count},
          {"images_sha256", pixels.hex_digest()},
          {"labels_sha256", convlab::tools::sha256_hex(d.labels)}};
}

/// The command line.
struct Options {
  std::string arch = "ece408";
  std::uint32_t seed = 1;
  convlab::tools::TrainOptions opt;
  std::string out_dir;
  std::optional<std::string> data_flag;
  bool every_epoch = false;
};

void add_options(CLI::App& app, Options& o) {
  convlab::tools::TrainOptions& opt = o.opt;
  app.add_option("--arch", o.arch, "Network: ece408 or two-conv")
      ->check(CLI::IsMember(convlab::tools::architecture_names()));
  app.add_option("--seed", o.seed, "Seed of the initial weights and the data order");
  app.add_option("--epochs", opt.epochs, "Passes over the training set")
      ->check(CLI::Range(0, 1000));
  app.add_option("--out", o.out_dir, "Directory for the model files")->required();
  app.add_option("--data", o.data_flag,
                 "Fashion-MNIST directory (default: $CONVLAB_DATA or " +
                     std::string(convlab::data::kDefaultDataDir) + ")");
  app.add_flag("--checkpoint-every-epoch", o.every_epoch,
               "Also write init.safetensors and epoch-N.safetensors");
  app.add_option("--batch", opt.batch, "Images per step")->check(CLI::Range(1, 100000));
  app.add_option("--slices", opt.slices, "Fixed slices per batch (part of the result: keep it)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--optimizer", opt.optimizer, "sgd (with momentum) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--lr", opt.lr, "Peak learning rate");
  app.add_option("--momentum", opt.momentum, "SGD momentum (Adam: beta1)");
  app.add_option("--weight-decay", opt.weight_decay, "L2 on weights");
  app.add_option("--schedule", opt.schedule, "cosine or constant")
      ->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--train-images", opt.train_limit, "Use only the first N training images");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a convlab network on Fashion-MNIST (CPU, deterministic for a seed)"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  o.opt.seed = o.seed;
  const std::string& arch = o.arch;
  const std::uint32_t seed = o.seed;
  const convlab::tools::TrainOptions& opt = o.opt;
  const std::string& out_dir = o.out_dir;
  const std::optional<std::string>& data_flag = o.data_flag;
  const bool every_epoch = o.every_epoch;

  try {
    using clock = std::chrono::steady_clock;
    const auto t_start = clock::now();
    const fs::path dir =
        convlab::data::data_dir(data_flag ? std::optional<fs::path>(*data_flag) : std::nullopt);
    std::printf("Loading fashion-mnist data from %s... ", dir.c_str());
    std::fflush(stdout);
    const auto train = convlab::data::load_fashion_mnist(dir, convlab::data::Split::train);
    const auto test = convlab::data::load_fashion_mnist(dir, convlab::data::Split::test);
    std::printf("done (%lld train, %lld test)\n", static_cast<long long>(train.count),
                static_cast<long long>(test.count));
    const json data_json = {{"train", data_record(train)}, {"test", data_record(test)}};

    convlab::Model model = convlab::tools::make_architecture(arch, seed);
    fs::create_directories(out_dir);
    std::printf(
        "arch %s, seed %u, %d epochs, %s lr %g momentum %g wd %g %s, batch %d in %d "
        "slices, %d threads\n",
        arch.c_str(), seed, opt.epochs, opt.optimizer.c_str(), opt.lr, opt.momentum,
        opt.weight_decay, opt.schedule.c_str(), opt.batch, opt.slices, convlab::cpu_threads());
    std::fflush(stdout);

    json history = json::array();
    const auto save = [&](const convlab::tools::EpochReport& r, const convlab::Model& m,
                          const fs::path& path) {
      convlab::Model copy = m;
      const json prov = {
          {"tool", "convlab-train"},
          {"trainer_version", std::string(convlab::tools::kTrainerVersion)},
          {"arch", arch},
          {"seed", seed},
          {"epochs", opt.epochs},
          {"epoch", r.epoch},
          {"optimizer", opt.optimizer},
          {"lr", opt.lr},
          {"momentum", opt.momentum},
          {"weight_decay", opt.weight_decay},
          {"lr_schedule", opt.schedule},
          {"batch", opt.batch},
          {"slices", opt.slices},
          {"train_images", opt.train_limit > 0
                               ? std::min<std::int64_t>(opt.train_limit, train.count)
                               : train.count},
          {"init", "uniform Glorot (tanh, softmax) / He (relu) from mt19937 raw output"},
          {"data", data_json},
          {"history", history}};
      copy.provenance = prov.dump();
      convlab::save_model(path, copy);
    };
    // No wall times in the file: the same seed and options give the same bytes.
    const auto on_epoch = [&](const convlab::tools::EpochReport& r, const convlab::Model& m) {
      history.push_back({{"epoch", r.epoch},
                         {"loss", r.loss},
                         {"train_accuracy", r.train_accuracy},
                         {"test_accuracy", r.test_accuracy}});
      if (r.epoch == 0) {
        std::printf("epoch 0: test acc %.4f (initial weights)\n", r.test_accuracy);
      } else {
        std::printf("epoch %d: loss %.4f  train acc %.4f  test acc %.4f  %.1f s\n", r.epoch, r.loss,
                    r.train_accuracy, r.test_accuracy, r.seconds);
      }
      std::fflush(stdout);
      if (every_epoch) {
        save(r, m,
             fs::path(out_dir) / (r.epoch == 0
                                      ? std::string("init.safetensors")
                                      : "epoch-" + std::to_string(r.epoch) + ".safetensors"));
      }
      if (r.epoch == opt.epochs) save(r, m, fs::path(out_dir) / "final.safetensors");
    };
    convlab::tools::train_model(model, train, &test, opt, on_epoch);
    std::printf("wrote %s (%.1f s in all)\n", (fs::path(out_dir) / "final.safetensors").c_str(),
                std::chrono::duration<double>(clock::now() - t_start).count());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convlab-train: %s\n", e.what());
    return 1;
  }
  return 0;
}
