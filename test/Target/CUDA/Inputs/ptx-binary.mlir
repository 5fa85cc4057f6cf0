// Input of errors.test and fatbin.test: a binary holding PTX, as --gpu-module-to-binary{format=isa} leaves it.
module attributes {gpu.container_module} {
  gpu.binary @weft_kernels [#gpu.object<#nvvm.target<chip = "sm_80">, assembly = ".version 8.0\n.target sm_80\n.address_size 64\n">]
}
