kernel void matrix_mult_chatty(global const float *left, global const float *right,
                               global float *out, int m, int n, int k)
{
    const size_t gx = get_global_id(0), gy = get_global_id(1);
    if (gy < m && gx < n) {
        float dot = 0.0f;
        for (int i = 0; i < k; i++)
            dot = fma(left[gy * k + i], right[i * n + gx], dot);
        out[gy * n + gx] = dot;
        printf("work-item %d,%d wrote C[%d] = %f\n", (int)gy, (int)gx, (int)(gy * n + gx), dot);
    }
}
