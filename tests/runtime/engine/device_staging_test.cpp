// The engine's side of staging CUDA buffers through host memory, on any machine: TorchDeviceStaging
// with "device" memory that is host memory (LibTorch's CPU copies take the path CUDA's take),
// alone and under a StagedBackend whose ranks all-reduce fp32 and bf16 tensors; and
// jobCommunication's choice, device and summary on the CPU accelerator.

#include "runtime/engine/device_staging.hpp"

#include <cstdlib>
#include <optional>
#include <string>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"

namespace stretch::engine {
namespace {

comm::BufferView deviceView(const torch::Tensor& tensor, comm::DataType dtype) {
  return comm::BufferView{tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), dtype,
                          comm::Device::cuda(0)};
}

std::shared_ptr<accel::Accelerator> cpu() {
  return accel::createAccelerator("cpu");
}

TEST(TorchDeviceStaging, CopiesToPinnedHostMemoryAndBack) {
  TorchDeviceStaging staging(cpu(), torch::kCPU);
  EXPECT_EQ(staging.device(), comm::DeviceType::Cuda);
  const torch::Tensor values = torch::arange(10, torch::kFloat32);
  const auto view = deviceView(values, comm::DataType::Float32);
  void* host = staging.allocateHost(view.bytes());
  ASSERT_NE(host, nullptr);
  staging.toHost(host, view);
  EXPECT_TRUE(torch::equal(torch::from_blob(host, {10}, torch::kFloat32), values));

  static_cast<float*>(host)[3] = -1.0f;
  const torch::Tensor target = torch::zeros({10}, torch::kFloat32);
  staging.toDevice(deviceView(target, comm::DataType::Float32), host);
  EXPECT_EQ(target[3].item<float>(), -1.0f);
  EXPECT_EQ(target[9].item<float>(), 9.0f);
  staging.freeHost(host, view.bytes());
}

TEST(TorchDeviceStaging, StagedRanksAllReduceFp32AndBf16Tensors) {
  comm::InProcessWorld world(3);
  comm::runRankThreads(3, [&](int rank) {
    comm::StagedBackend backend(world.backend(rank),
                                std::make_shared<TorchDeviceStaging>(cpu(), torch::kCPU));
    const torch::Tensor grads = torch::full({257}, static_cast<float>(rank + 1));
    backend.allReduce(deviceView(grads, comm::DataType::Float32), comm::ReduceOp::Sum)->wait();
    EXPECT_TRUE(torch::equal(grads, torch::full({257}, 6.0f)));
    const torch::Tensor half = torch::full({33}, 0.5 * (rank + 1), torch::kBFloat16);
    backend.allReduce(deviceView(half, comm::DataType::BFloat16), comm::ReduceOp::Avg)->wait();
    EXPECT_TRUE(torch::equal(half, torch::full({33}, 1.0, torch::kBFloat16)));
  });
}

// Sets variables for one scope, restoring what was there.
class ScopedVariables {
 public:
  ScopedVariables(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value != nullptr)
        ::setenv(name, value, 1);
      else
        ::unsetenv(name);
    }
  }
  ~ScopedVariables() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(JobCommunication, ACpuJobUsesGlooAndNoStaging) {
  comm::registerBuiltinBackends();
  accel::setAccelerator(cpu());
  {
    ScopedVariables env({{"WORLD_SIZE", "4"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"RANK", "1"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", "29500"},
                         {"STRETCH_COMM_BACKEND", nullptr}});
    const JobComm job = jobCommunication();
    EXPECT_EQ(job.choice.summary, "comm: gloo, 2 ranks on the CPU");
    EXPECT_EQ(job.device.backend, "");
    EXPECT_EQ(job.device.staging, nullptr);
  }
  {
    ScopedVariables env({{"WORLD_SIZE", "2"},
                         {"RANK", "0"},
                         {"LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", "29500"},
                         {"STRETCH_COMM_BACKEND", "nccl"}});
    try {
      jobCommunication();
      FAIL() << "nccl accepted for a CPU job";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("STRETCH_COMM_BACKEND = nccl"), std::string::npos)
          << e.what();
    }
  }
  {
    ScopedVariables env({{"WORLD_SIZE", "2"},
                         {"RANK", "0"},
                         {"LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", "29500"},
                         {"LOCAL_WORLD_SIZE", "two"},
                         {"STRETCH_COMM_BACKEND", nullptr}});
    EXPECT_THROW(jobCommunication(), ConfigError);
  }
  accel::setAccelerator(nullptr);
}

}  // namespace
}  // namespace stretch::engine
