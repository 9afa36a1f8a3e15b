// tests/cpp/cli/cli_runner.cpp -- posix_spawn of the binary with files for stdout and stderr
#include "cli_runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "golden.hpp"
#include "vramscope/format/agent_segments.hpp"

extern char** environ;

namespace vramscope::testing {

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "vramscope-cli-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  m_path = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(m_path, ignored);
}

std::string cli_path() { return VRAMSCOPE_CLI_PATH; }

std::string nvml_double_path() {
  // Running test_cli by hand against a double built elsewhere: VRAMSCOPE_TEST_NVML_DOUBLE.
  const char* override_path = std::getenv("VRAMSCOPE_TEST_NVML_DOUBLE");
  if (override_path != nullptr && override_path[0] != '\0') return override_path;
  return VRAMSCOPE_NVML_DOUBLE_PATH;
}

std::string nvml_script(const std::string& name) { return test_data_dir() + "/nvml/" + name; }

std::map<std::string, std::optional<std::string>> double_env(const std::string& script) {
  return {{"VRAMSCOPE_NVML_LIBRARY", nvml_double_path()}, {"VRAMSCOPE_NVML_DOUBLE_SCRIPT", script}};
}

pid_t spawn_cli(const TempDir& dir, const std::vector<std::string>& args,
                const std::map<std::string, std::optional<std::string>>& env, int stdout_fd) {
  std::map<std::string, std::optional<std::string>> overrides = {
      {"TZ", "UTC"}, {"NO_COLOR", std::nullopt}, {"VRAMSCOPE_SHM_DIR", dir.file("shm")}};
  for (const auto& [key, value] : env) overrides[key] = value;

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (overrides.count(text.substr(0, text.find('='))) == 0) environment.push_back(text);
  }
  for (const auto& [key, value] : overrides) {
    if (value) environment.push_back(key + "=" + *value);
  }
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_text = {cli_path()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string err_path = dir.file(".stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CliResult run_cli(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::optional<std::string>>& env) {
  CliResult result;
  const std::string out_path = dir.file(".stdout");
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out_fd < 0) {
    ADD_FAILURE() << "cannot create " << out_path;
    return result;
  }
  const pid_t pid = spawn_cli(dir, args, env, out_fd);
  close(out_fd);
  if (pid < 0) {
    ADD_FAILURE() << "cannot start " << cli_path();
    return result;
  }
  result.exit_code = wait_exit_code(pid);
  result.out = read_text_file(out_path);
  result.err = read_text_file(dir.file(".stderr"));
  return result;
}

SleepingProcess::SleepingProcess() {
  char arg0[] = "sleep";
  char arg1[] = "600";
  char* argv[] = {arg0, arg1, nullptr};
  if (posix_spawnp(&m_pid, "sleep", nullptr, nullptr, argv, environ) != 0) m_pid = 0;
}

SleepingProcess::~SleepingProcess() {
  if (m_pid <= 0) return;
  kill(m_pid, SIGKILL);
  waitpid(m_pid, nullptr, 0);
}

OneGpuTrainer::OneGpuTrainer(const TempDir& dir) {
  const nlohmann::ordered_json script = {
      {"driver_version", "580.159.03"},
      {"devices",
       {{{"name", "NVIDIA H200"},
         {"uuid", uuid},
         {"memory", {{"total", 143771 * mib}, {"reserved", 528 * mib}, {"used", 30000 * mib}}},
         {"processes", {{{"pid", pid()}, {"used", 30000 * mib}, {"kinds", {"compute"}}}}}}}}};
  std::ofstream(dir.file("script.json")) << script.dump();
  m_env = double_env(dir.file("script.json"));
  stats.pid = static_cast<uint32_t>(pid());
  stats.device_uuid = uuid;
  stats.allocated_bytes = 20480 * mib;
  stats.reserved_bytes = 24576 * mib;
  m_writer = open_agent_segment_writer(static_cast<uint32_t>(pid()), 1, dir.file("shm"));
}

}  // namespace vramscope::testing
