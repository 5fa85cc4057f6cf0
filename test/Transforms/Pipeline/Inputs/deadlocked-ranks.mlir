// Each rank receives before it sends: neither ever gets to its send.
module attributes {weft.mesh = #weft.mesh<pp = 2>} {
  func.func @train_step.rank0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {weft.pipeline_rank = 0 : i64} {
    %g = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64, weft.message = "the gradient"} : tensor<4xf32>
    weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64, weft.message = "the activation"} : tensor<4xf32>
    return %g : tensor<4xf32>
  }
  func.func @train_step.rank1(%y: tensor<4xf32>) -> tensor<4xf32> attributes {weft.pipeline_rank = 1 : i64} {
    %a = weft.recv {axes = ["pp"], peer = 0 : i64, tag = 0 : i64, weft.message = "the activation"} : tensor<4xf32>
    weft.send %y {axes = ["pp"], peer = 0 : i64, tag = 1 : i64, weft.message = "the gradient"} : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}
