// Ripple-carry adder: W full adders in a chain (sum = a + b + cin).
module rca_full_adder (input a, input b, input c, output s, output co);
  assign s = a ^ b ^ c;
  assign co = (a & b) | (c & (a ^ b));
endmodule

module adder_ripple #(parameter W = 16) (
  input  [W-1:0] a,
  input  [W-1:0] b,
  input          cin,
  output [W-1:0] sum,
  output         cout
);
  wire [W:0] c;
  assign c[0] = cin;
  genvar i;
  generate
    for (i = 0; i < W; i = i + 1) begin : fa
      rca_full_adder u (.a(a[i]), .b(b[i]), .c(c[i]), .s(sum[i]), .co(c[i+1]));
    end
  endgenerate
  assign cout = c[W];
endmodule
