// Synchronous FIFO, DEPTH (a power of two) words of WIDTH bits: a register file, write and
// read pointers one bit wider than the address (full = same address, other lap), and a
// synchronous reset. Yosys maps the memory to flip-flops and read multiplexers.
module fifo #(parameter WIDTH = 16, parameter DEPTH = 8) (
  input              clk,
  input              rst,
  input              wr,
  input              rd,
  input  [WIDTH-1:0] din,
  output [WIDTH-1:0] dout,
  output             full,
  output             empty
);
  localparam AW = $clog2(DEPTH);
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  reg [AW:0] wp;
  reg [AW:0] rp;
  assign empty = wp == rp;
  assign full = (wp[AW] != rp[AW]) && (wp[AW-1:0] == rp[AW-1:0]);
  assign dout = mem[rp[AW-1:0]];
  always @(posedge clk) begin
    if (rst) begin
      wp <= 0;
      rp <= 0;
    end else begin
      if (wr && !full) begin
        mem[wp[AW-1:0]] <= din;
        wp <= wp + 1'b1;
      end
      if (rd && !empty) rp <= rp + 1'b1;
    end
  end
endmodule
