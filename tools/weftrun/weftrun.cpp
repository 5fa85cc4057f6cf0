//===- weftrun.cpp - Start, watch and restart a training job --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftrun [options] ./train [train's flags]: maps flags (torchrun's names,
// with - or _) to lib/Launcher's options.
//
//===----------------------------------------------------------------------===//

#include "weft/Launcher/Launcher.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char **argv) {
  weft::launcher::LaunchOptions options;
  CLI::App app{"weftrun: starts the ranks of a Weft training executable with "
               "torchrun's environment, prefixes their output with the rank, "
               "forwards SIGINT/SIGTERM/SIGHUP, and stops (or restarts) the "
               "job when a rank fails.\n\n"
               "  weftrun --nproc-per-node 1 ./train --data x.npy --steps 100\n"
               "  weftrun --nproc-per-node 4 --max-restarts 2 ./train "
               "--checkpoint-dir ckpt ...\n",
               "weftrun"};
  app.add_option("--nproc-per-node,--nproc_per_node", options.nprocPerNode,
                 "Processes (ranks) on this node")
      ->capture_default_str();
  app.add_option("--nnodes", options.nnodes, "Nodes in the job")
      ->capture_default_str();
  app.add_option("--node-rank,--node_rank", options.nodeRank,
                 "This node's index in [0, --nnodes)")
      ->capture_default_str();
  app.add_option("--master-addr,--master_addr", options.masterAddr,
                 "Address of rank 0's rendezvous (default loopback)")
      ->capture_default_str();
  app.add_option("--master-port,--master_port", options.masterPort,
                 "Port of rank 0's rendezvous")
      ->capture_default_str();
  app.add_option("--max-restarts,--max_restarts", options.maxRestarts,
                 "Restart every rank this many times after a failure; the "
                 "executable resumes from its newest checkpoint")
      ->capture_default_str();
  app.add_option("--heartbeat-timeout", options.heartbeatTimeout,
                 "Seconds a rank may go without finishing a step before it "
                 "counts as hung (0: off)")
      ->capture_default_str();
  app.add_option("--stop-grace", options.stopGrace,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  app.prefix_command();
  app.footer("Every rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, "
             "GROUP_RANK, MASTER_ADDR, MASTER_PORT and "
             "TORCHELASTIC_RESTART_COUNT, as under torchrun.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  options.command = app.remaining();
  return weft::launcher::runJob(options, std::cout, std::cerr);
}
