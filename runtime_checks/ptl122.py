"""PTL122 conv-bias-before-batchnorm: the bias is dropped, the output is kept."""
CHANGES = {"parameters": "fixed has no convolution bias (out_channels fewer parameters)"}
