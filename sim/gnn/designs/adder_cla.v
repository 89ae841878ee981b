// Carry-lookahead adder as a Kogge-Stone parallel prefix: log2(W) levels of (generate,
// propagate) combination, so the carry depth grows with log2(W), not W.
// g/p of level l live in bits [l*W +: W] of flat vectors (no wire arrays: portable).
module adder_cla #(parameter W = 16) (
  input  [W-1:0] a,
  input  [W-1:0] b,
  input          cin,
  output [W-1:0] sum,
  output         cout
);
  localparam L = $clog2(W);
  wire [(L+1)*W-1:0] g;
  wire [(L+1)*W-1:0] p;
  assign g[W-1:0] = a & b;
  assign p[W-1:0] = a ^ b;
  genvar i, l;
  generate
    for (l = 0; l < L; l = l + 1) begin : lvl
      for (i = 0; i < W; i = i + 1) begin : col
        if (i >= (1 << l)) begin : comb
          assign g[(l+1)*W + i] = g[l*W + i] | (p[l*W + i] & g[l*W + i - (1 << l)]);
          assign p[(l+1)*W + i] = p[l*W + i] & p[l*W + i - (1 << l)];
        end else begin : pass
          assign g[(l+1)*W + i] = g[l*W + i];
          assign p[(l+1)*W + i] = p[l*W + i];
        end
      end
    end
  endgenerate
  // carry into bit i+1: the prefix (G, P) of bits 0..i applied to cin
  wire [W:0] c;
  assign c[0] = cin;
  generate
    for (i = 0; i < W; i = i + 1) begin : carry
      assign c[i+1] = g[L*W + i] | (p[L*W + i] & cin);
    end
  endgenerate
  assign sum = p[W-1:0] ^ c[W-1:0];
  assign cout = c[W];
endmodule
