// Unsigned W x W array multiplier: row 0 is the partial product a & b[0]; each further
// row j adds a & b[j] to the upper W bits of the previous row with a ripple of full adders.
// Row j's W+1-bit partial sum lives in bits [j*(W+1) +: W+1] of s.
module mul_full_adder (input a, input b, input c, output s, output co);
  assign s = a ^ b ^ c;
  assign co = (a & b) | (c & (a ^ b));
endmodule

module mul_array #(parameter W = 8) (
  input  [W-1:0]   a,
  input  [W-1:0]   b,
  output [2*W-1:0] p
);
  wire [W*(W+1)-1:0] s;
  wire [W*(W+1)-1:0] c;
  genvar i, j;
  generate
    for (i = 0; i < W; i = i + 1) begin : row0
      assign s[i] = a[i] & b[0];
    end
    assign s[W] = 1'b0;
    assign p[0] = s[0];
    for (j = 1; j < W; j = j + 1) begin : rows
      assign c[j*(W+1)] = 1'b0;
      for (i = 0; i < W; i = i + 1) begin : cols
        mul_full_adder u (
          .a(s[(j-1)*(W+1) + i + 1]), .b(a[i] & b[j]), .c(c[j*(W+1) + i]),
          .s(s[j*(W+1) + i]), .co(c[j*(W+1) + i + 1])
        );
      end
      assign s[j*(W+1) + W] = c[j*(W+1) + W];
      assign p[j] = s[j*(W+1)];
    end
    for (i = 1; i <= W; i = i + 1) begin : upper
      assign p[W-1+i] = s[(W-1)*(W+1) + i];
    end
  endgenerate
endmodule
