package testprovider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// objectDataSource is data "kltest_object": reads an object of the fake
// cloud API by id (its delay first, when set) and returns its name,
// fingerprint, secret (sensitive) and labels.
type objectDataSource struct {
	data *providerData
}

var _ datasource.DataSourceWithConfigure = (*objectDataSource)(nil)

type objectDataModel struct {
	ID          types.String `tfsdk:"id"`
	Delay       types.String `tfsdk:"delay"`
	Name        types.String `tfsdk:"name"`
	Fingerprint types.String `tfsdk:"fingerprint"`
	Secret      types.String `tfsdk:"secret"`
	Labels      types.Map    `tfsdk:"labels"`
}

func (d *objectDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_object"
}

func (d *objectDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Reads an object of the fake cloud API by id.",
		Attributes: map[string]schema.Attribute{
			"id":          schema.StringAttribute{Required: true},
			"delay":       schema.StringAttribute{Optional: true, Description: `How long the read takes (a Go duration, e.g. "200ms").`},
			"name":        schema.StringAttribute{Computed: true},
			"fingerprint": schema.StringAttribute{Computed: true},
			"secret":      schema.StringAttribute{Computed: true, Sensitive: true},
			"labels":      schema.MapAttribute{Computed: true, ElementType: types.StringType},
		},
	}
}

func (d *objectDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	pd, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("%T", req.ProviderData))
		return
	}
	d.data = pd
}

func (d *objectDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m objectDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	delay, err := parseDelay(m.Delay)
	if err != nil {
		resp.Diagnostics.AddError("Invalid delay", err.Error())
		return
	}
	o, err := d.data.api.get(ctx, m.ID.ValueString(), delay)
	if err != nil {
		resp.Diagnostics.AddError("Reading object", err.Error())
		return
	}
	m.Name = types.StringValue(o.Name)
	m.Fingerprint = types.StringValue(o.fingerprint())
	m.Secret = types.StringPointerValue(o.Secret)
	m.Labels = types.MapNull(types.StringType)
	if o.Settings != nil && o.Settings.Labels != nil {
		labels, diags := types.MapValueFrom(ctx, types.StringType, o.Settings.Labels)
		resp.Diagnostics.Append(diags...)
		m.Labels = labels
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
