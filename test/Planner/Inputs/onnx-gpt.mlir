module {
  func.func @forward(%arg0: tensor<64x32xf32> {weft.param = "wte.weight"}, %arg1: tensor<32xf32> {weft.param = "h.0.ln_1.weight"}, %arg2: tensor<32xf32> {weft.param = "h.0.ln_1.bias"}, %arg3: tensor<96xf32> {weft.param = "h.0.attn.c_attn.bias"}, %arg4: tensor<32xf32> {weft.param = "h.0.attn.c_proj.bias"}, %arg5: tensor<32xf32> {weft.param = "h.0.ln_2.weight"}, %arg6: tensor<32xf32> {weft.param = "h.0.ln_2.bias"}, %arg7: tensor<128xf32> {weft.param = "h.0.mlp.c_fc.bias"}, %arg8: tensor<32xf32> {weft.param = "h.0.mlp.c_proj.bias"}, %arg9: tensor<32xf32> {weft.param = "h.1.ln_1.weight"}, %arg10: tensor<32xf32> {weft.param = "h.1.ln_1.bias"}, %arg11: tensor<96xf32> {weft.param = "h.1.attn.c_attn.bias"}, %arg12: tensor<32xf32> {weft.param = "h.1.attn.c_proj.bias"}, %arg13: tensor<32xf32> {weft.param = "h.1.ln_2.weight"}, %arg14: tensor<32xf32> {weft.param = "h.1.ln_2.bias"}, %arg15: tensor<128xf32> {weft.param = "h.1.mlp.c_fc.bias"}, %arg16: tensor<32xf32> {weft.param = "h.1.mlp.c_proj.bias"}, %arg17: tensor<32xf32> {weft.param = "ln_f.weight"}, %arg18: tensor<32xf32> {weft.param = "ln_f.bias"}, %arg19: tensor<16x32xf32> {weft.param = "onnx::Add_253"}, %arg20: tensor<32x96xf32> {weft.param = "onnx::MatMul_254"}, %arg21: tensor<32x32xf32> {weft.param = "onnx::MatMul_278"}, %arg22: tensor<32x128xf32> {weft.param = "onnx::MatMul_279"}, %arg23: tensor<128x32xf32> {weft.param = "onnx::MatMul_280"}, %arg24: tensor<32x96xf32> {weft.param = "onnx::MatMul_281"}, %arg25: tensor<32x32xf32> {weft.param = "onnx::MatMul_305"}, %arg26: tensor<32x128xf32> {weft.param = "onnx::MatMul_306"}, %arg27: tensor<128x32xf32> {weft.param = "onnx::MatMul_307"}, %arg28: tensor<4x16xi64> {weft.input = "input"}) -> tensor<4x16x64xf32> {
    %0 = weft.constant dense<0.797884583> : tensor<f32>
    %1 = weft.constant dense<4.471500e-02> : tensor<f32>
    %2 = weft.constant dense<5.000000e-01> : tensor<f32>
    %3 = weft.constant dense<1.000000e+00> : tensor<f32>
    %4 = weft.constant dense<1.41421354> : tensor<f32>
    %5 = weft.constant dense<2.500000e-01> : tensor<f32>
    %6 = weft.transpose %arg0 {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %7 = weft.gather %arg0, %arg28 {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<4x16x32xf32>
    %8 = weft.add %7, %arg19 : (tensor<4x16x32xf32>, tensor<16x32xf32>) -> tensor<4x16x32xf32>
    %9 = weft.layer_norm %8, %arg1, %arg2 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    %10 = weft.matmul %9, %arg20 : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<4x16x96xf32>
    %11 = weft.add %arg3, %10 : (tensor<96xf32>, tensor<4x16x96xf32>) -> tensor<4x16x96xf32>
    %12 = weft.slice %11 {limits = array<i64: 4, 16, 32>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %13 = weft.slice %11 {limits = array<i64: 4, 16, 64>, starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %14 = weft.slice %11 {limits = array<i64: 4, 16, 96>, starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %15 = weft.reshape %12 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %16 = weft.transpose %15 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %17 = weft.reshape %13 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %18 = weft.reshape %14 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %19 = weft.transpose %18 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %20 = weft.transpose %17 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %21 = weft.matmul %16, %20 : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x2x16x16xf32>
    %22 = weft.mul %21, %5 : (tensor<4x2x16x16xf32>, tensor<f32>) -> tensor<4x2x16x16xf32>
    %23 = weft.causal_mask %22 : tensor<4x2x16x16xf32>
    %24 = weft.softmax %23 {axis = 3 : i64} : tensor<4x2x16x16xf32>
    %25 = weft.matmul %24, %19 : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x2x16x16xf32>
    %26 = weft.transpose %25 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x2x16x16xf32>) -> tensor<4x16x2x16xf32>
    %27 = weft.reshape %26 : tensor<4x16x2x16xf32> -> tensor<4x16x32xf32>
    %28 = weft.matmul %27, %arg21 : (tensor<4x16x32xf32>, tensor<32x32xf32>) -> tensor<4x16x32xf32>
    %29 = weft.add %arg4, %28 : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %30 = weft.add %8, %29 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %31 = weft.layer_norm %30, %arg5, %arg6 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    %32 = weft.matmul %31, %arg22 : (tensor<4x16x32xf32>, tensor<32x128xf32>) -> tensor<4x16x128xf32>
    %33 = weft.add %arg7, %32 : (tensor<128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %34 = weft.div %33, %4 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %35 = weft.erf %34 : tensor<4x16x128xf32>
    %36 = weft.add %35, %3 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %37 = weft.mul %33, %36 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %38 = weft.mul %37, %2 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %39 = weft.matmul %38, %arg23 : (tensor<4x16x128xf32>, tensor<128x32xf32>) -> tensor<4x16x32xf32>
    %40 = weft.add %arg8, %39 : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %41 = weft.add %30, %40 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %42 = weft.layer_norm %41, %arg9, %arg10 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    %43 = weft.matmul %42, %arg24 : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<4x16x96xf32>
    %44 = weft.add %arg11, %43 : (tensor<96xf32>, tensor<4x16x96xf32>) -> tensor<4x16x96xf32>
    %45 = weft.slice %44 {limits = array<i64: 4, 16, 32>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %46 = weft.slice %44 {limits = array<i64: 4, 16, 64>, starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %47 = weft.slice %44 {limits = array<i64: 4, 16, 96>, starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : (tensor<4x16x96xf32>) -> tensor<4x16x32xf32>
    %48 = weft.reshape %45 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %49 = weft.transpose %48 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %50 = weft.reshape %46 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %51 = weft.reshape %47 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
    %52 = weft.transpose %51 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %53 = weft.transpose %50 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x16x2x16xf32>) -> tensor<4x2x16x16xf32>
    %54 = weft.matmul %49, %53 : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x2x16x16xf32>
    %55 = weft.mul %54, %5 : (tensor<4x2x16x16xf32>, tensor<f32>) -> tensor<4x2x16x16xf32>
    %56 = weft.causal_mask %55 : tensor<4x2x16x16xf32>
    %57 = weft.softmax %56 {axis = 3 : i64} : tensor<4x2x16x16xf32>
    %58 = weft.matmul %57, %52 : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x2x16x16xf32>
    %59 = weft.transpose %58 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x2x16x16xf32>) -> tensor<4x16x2x16xf32>
    %60 = weft.reshape %59 : tensor<4x16x2x16xf32> -> tensor<4x16x32xf32>
    %61 = weft.matmul %60, %arg25 : (tensor<4x16x32xf32>, tensor<32x32xf32>) -> tensor<4x16x32xf32>
    %62 = weft.add %arg12, %61 : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %63 = weft.add %41, %62 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %64 = weft.layer_norm %63, %arg13, %arg14 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    %65 = weft.matmul %64, %arg26 : (tensor<4x16x32xf32>, tensor<32x128xf32>) -> tensor<4x16x128xf32>
    %66 = weft.add %arg15, %65 : (tensor<128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %67 = weft.mul %66, %66 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %68 = weft.mul %66, %67 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %69 = weft.mul %68, %1 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %70 = weft.add %66, %69 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %71 = weft.mul %70, %0 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %72 = weft.tanh %71 : tensor<4x16x128xf32>
    %73 = weft.add %72, %3 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %74 = weft.mul %66, %73 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
    %75 = weft.mul %74, %2 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
    %76 = weft.matmul %75, %arg27 : (tensor<4x16x128xf32>, tensor<128x32xf32>) -> tensor<4x16x32xf32>
    %77 = weft.add %arg16, %76 : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %78 = weft.add %63, %77 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
    %79 = weft.layer_norm %78, %arg17, %arg18 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    %80 = weft.matmul %79, %6 : (tensor<4x16x32xf32>, tensor<32x64xf32>) -> tensor<4x16x64xf32>
    return %80 : tensor<4x16x64xf32>
  }
}

