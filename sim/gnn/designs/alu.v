// W-bit ALU: add, sub, and, or, xor, shift left/right by b's low bits, signed less-than;
// zero flag. Arithmetic and shifts are behavioural: Yosys maps them (alumacc, techmap).
module alu #(parameter W = 32) (
  input      [W-1:0] a,
  input      [W-1:0] b,
  input      [2:0]   op,
  output reg [W-1:0] y,
  output             zero
);
  localparam SW = $clog2(W);
  always @* begin
    case (op)
      3'd0: y = a + b;
      3'd1: y = a - b;
      3'd2: y = a & b;
      3'd3: y = a | b;
      3'd4: y = a ^ b;
      3'd5: y = a << b[SW-1:0];
      3'd6: y = {{(W-1){1'b0}}, $signed(a) < $signed(b)};
      default: y = a >> b[SW-1:0];
    endcase
  end
  assign zero = (y == {W{1'b0}});
endmodule
